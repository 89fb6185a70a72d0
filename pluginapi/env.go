package pluginapi

import (
	"os"
	"strings"
)

// handshakeEnv are the variables go-plugin sets on a plugin process for the
// handshake. They mean nothing to the programs a handler starts.
var handshakeEnv = []string{
	"PLUGIN_MIN_PORT",
	"PLUGIN_MAX_PORT",
	"PLUGIN_PROTOCOL_VERSIONS",
	"PLUGIN_CLIENT_CERT",
	"PLUGIN_MULTIPLEX_GRPC",
	"PLUGIN_UNIX_SOCKET_DIR",
	"PLUGIN_UNIX_SOCKET_GROUP",
}

// ProcessEnv is this process's environment without the plugin handshake
// variables (the magic cookie, go-plugin's PLUGIN_* settings): the base
// environment for a process a handler starts, so that process is not
// mistaken for a plugin and does not see the host's connection settings.
func ProcessEnv() []string {
	env := os.Environ()
	out := env[:0]
	for _, kv := range env {
		key, _, _ := strings.Cut(kv, "=")
		if key == Handshake.MagicCookieKey || isHandshakeVar(key) {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func isHandshakeVar(key string) bool {
	for _, k := range handshakeEnv {
		if key == k {
			return true
		}
	}
	return false
}
