package config

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type sample struct {
	Dir     string        `flag:"data-dir" env:"CRONIX_DATA_DIR" yaml:"data_dir" help:"data"`
	Addr    string        `flag:"http-addr" env:"CRONIX_HTTP_ADDR" yaml:"http_addr" help:"addr"`
	TTL     time.Duration `flag:"ttl" env:"CRONIX_TTL" yaml:"ttl" help:"ttl"`
	Peers   []string      `flag:"peers" env:"CRONIX_PEERS" yaml:"peers" help:"peers"`
	Verbose bool          `flag:"verbose" env:"CRONIX_VERBOSE" yaml:"verbose" help:"v"`
	N       int           `flag:"n" env:"CRONIX_N" yaml:"n" help:"n"`
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestPrecedence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	require.NoError(t, os.WriteFile(file, []byte("data_dir: /from/yaml\nhttp_addr: yaml:1\npeers: [a, b]\nn: 3\n"), 0o600))
	cfg := sample{Dir: "./data", Addr: "def:1", TTL: time.Second}
	err := Load(&cfg, "x", "", []string{"--http-addr", "flag:1", "--verbose"},
		env(map[string]string{"CRONIX_CONFIG": file, "CRONIX_DATA_DIR": "/from/env", "CRONIX_TTL": "5s"}), &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, "/from/env", cfg.Dir)
	require.Equal(t, "flag:1", cfg.Addr)
	require.Equal(t, 5*time.Second, cfg.TTL)
	require.Equal(t, []string{"a", "b"}, cfg.Peers)
	require.Equal(t, 3, cfg.N)
	require.True(t, cfg.Verbose)
}

func TestErrors(t *testing.T) {
	t.Parallel()
	cfg := sample{}
	require.ErrorContains(t, Load(&cfg, "x", "", []string{"--ttl", "soon"}, env(nil), &bytes.Buffer{}), "duration")
	require.ErrorContains(t, Load(&cfg, "x", "", nil, env(map[string]string{"CRONIX_N": "many"}), &bytes.Buffer{}), "CRONIX_N")
	file := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(file, []byte("bogus: 1\n"), 0o600))
	require.ErrorContains(t, Load(&cfg, "x", "", []string{"--config", file}, env(nil), &bytes.Buffer{}), `unknown key "bogus"`)
	var out bytes.Buffer
	require.True(t, errors.Is(Load(&cfg, "x", "summary", []string{"--help"}, env(nil), &out), flag.ErrHelp))
	require.Contains(t, out.String(), "--data-dir")
	require.Contains(t, out.String(), "CRONIX_DATA_DIR")
}

func TestDurationsTakeDays(t *testing.T) {
	t.Parallel()
	cfg := sample{}
	require.NoError(t, Load(&cfg, "x", "", []string{"--ttl", "30d"}, env(nil), &bytes.Buffer{}))
	require.Equal(t, 30*24*time.Hour, cfg.TTL)
	require.NoError(t, Load(&cfg, "x", "", nil, env(map[string]string{"CRONIX_TTL": "90m"}), &bytes.Buffer{}))
	require.Equal(t, 90*time.Minute, cfg.TTL)
	for _, bad := range []string{"1.5d", "-2d", "d", "xd"} {
		require.ErrorContains(t, Load(&cfg, "x", "", []string{"--ttl", bad}, env(nil), &bytes.Buffer{}), "duration", bad)
	}
}
