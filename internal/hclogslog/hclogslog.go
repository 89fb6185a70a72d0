// Package hclogslog adapts a *slog.Logger to hashicorp/go-hclog, the logger raft and
// go-plugin log through, so their lines reach Cronix's structured logs.
package hclogslog

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// slogHCLog is the adapter. go-plugin relogs its own lines and the plugin's
// stderr through it, at the level the plugin wrote; the slog handler decides
// what is shown.
type slogHCLog struct {
	l       *slog.Logger
	name    string
	implied []any
}

var _ hclog.Logger = (*slogHCLog)(nil)

// New returns an hclog.Logger writing to l; a non-empty name is added as
// the "component" attribute and used as the logger name.
func New(l *slog.Logger, name string) hclog.Logger {
	if name != "" {
		l = l.With("component", name)
	}
	return &slogHCLog{l: l, name: name}
}

func slogLevel(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (h *slogHCLog) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off {
		return
	}
	h.l.Log(context.Background(), slogLevel(level), msg, values(args)...)
}

// values renders hclog's formatting value types as hclog does, so that
// slog does not print them as raw slices: hclog.Fmt("%+v", x) (raft's
// "servers" of its initial configuration) becomes the formatted string,
// hclog.Hex/Octal/Binary numbers their digits, hclog.Quote a quoted string.
func values(args []any) []any {
	var out []any
	for i := 1; i < len(args); i += 2 {
		var v any
		switch x := args[i].(type) {
		case hclog.Format:
			if len(x) == 0 {
				v = ""
			} else if f, ok := x[0].(string); ok {
				v = fmt.Sprintf(f, x[1:]...)
			} else {
				v = fmt.Sprint(x...)
			}
		case hclog.Hex:
			v = "0x" + strconv.FormatUint(uint64(x), 16)
		case hclog.Octal:
			v = "0" + strconv.FormatUint(uint64(x), 8)
		case hclog.Binary:
			v = "0b" + strconv.FormatUint(uint64(x), 2)
		case hclog.Quote:
			v = strconv.Quote(string(x))
		default:
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = v
	}
	if out == nil {
		return args
	}
	return out
}

func (h *slogHCLog) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *slogHCLog) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *slogHCLog) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *slogHCLog) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *slogHCLog) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

func (h *slogHCLog) enabled(l slog.Level) bool { return h.l.Enabled(context.Background(), l) }

func (h *slogHCLog) IsTrace() bool { return h.enabled(slog.LevelDebug) }
func (h *slogHCLog) IsDebug() bool { return h.enabled(slog.LevelDebug) }
func (h *slogHCLog) IsInfo() bool  { return h.enabled(slog.LevelInfo) }
func (h *slogHCLog) IsWarn() bool  { return h.enabled(slog.LevelWarn) }
func (h *slogHCLog) IsError() bool { return h.enabled(slog.LevelError) }

func (h *slogHCLog) ImpliedArgs() []any { return h.implied }

func (h *slogHCLog) With(args ...any) hclog.Logger {
	return &slogHCLog{l: h.l.With(values(args)...), name: h.name, implied: append(append([]any(nil), h.implied...), args...)}
}

func (h *slogHCLog) Name() string { return h.name }

func (h *slogHCLog) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.ResetNamed(name)
}

func (h *slogHCLog) ResetNamed(name string) hclog.Logger {
	return &slogHCLog{l: h.l.With("subsystem", name), name: name, implied: h.implied}
}

// SetLevel is a no-op: the slog handler decides.
func (h *slogHCLog) SetLevel(hclog.Level) {}

func (h *slogHCLog) GetLevel() hclog.Level {
	switch {
	case h.IsDebug():
		return hclog.Debug
	case h.IsInfo():
		return hclog.Info
	case h.IsWarn():
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func (h *slogHCLog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(h.StandardWriter(opts), "", 0)
}

func (h *slogHCLog) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return slogWriter{h}
}

type slogWriter struct{ h *slogHCLog }

func (w slogWriter) Write(p []byte) (int, error) {
	w.h.Info(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
