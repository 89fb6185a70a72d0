package pluginapi

import (
	"io"
	"log/slog"
	"os"
)

// Logger returns a logger for handler code running in a plugin process. It
// writes JSON lines to stderr in the shape go-plugin's host parses
// (@level, @message, @timestamp), so the node logs them at their level
// under the plugin's name. Do not write anything else to stdout: the
// handshake owns it.
func Logger() *slog.Logger { return newLogger(os.Stderr) }

func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 {
				return a
			}
			switch a.Key {
			case slog.TimeKey:
				return slog.String("@timestamp", a.Value.Time().Format("2006-01-02T15:04:05.000000Z07:00"))
			case slog.LevelKey:
				lvl, _ := a.Value.Any().(slog.Level)
				return slog.String("@level", hclogLevel(lvl))
			case slog.MessageKey:
				return slog.String("@message", a.Value.String())
			}
			return a
		},
	}))
}

func hclogLevel(l slog.Level) string {
	switch {
	case l < slog.LevelInfo:
		return "debug"
	case l < slog.LevelWarn:
		return "info"
	case l < slog.LevelError:
		return "warn"
	default:
		return "error"
	}
}
