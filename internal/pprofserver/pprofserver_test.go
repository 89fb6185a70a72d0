package pprofserver

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // a test against its own listener
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func TestServesProfilesAndStops(t *testing.T) {
	s, err := Start(context.Background(), "127.0.0.1:0", nil)
	require.NoError(t, err)
	base := "http://" + s.Addr() + "/debug/pprof/"

	code, body := get(t, base)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "mutex")
	require.Contains(t, body, "block")
	code, body = get(t, base+"goroutine?debug=1")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "goroutine profile:")
	require.Equal(t, MutexProfileFraction, runtime.SetMutexProfileFraction(-1), "mutex profiling is on while serving")

	s.Close()
	s.Close()               // idempotent
	_, err = http.Get(base) //nolint:gosec,noctx // a test against its own listener
	require.Error(t, err, "the listener is closed")
	require.Zero(t, runtime.SetMutexProfileFraction(-1), "mutex profiling is off again")
}

func TestStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s, err := Start(ctx, "127.0.0.1:0", nil)
	require.NoError(t, err)
	cancel()
	<-s.done // the serving goroutine ends without Close
	s.Close()
}

func TestBadAddress(t *testing.T) {
	_, err := Start(context.Background(), "256.0.0.1:x", nil)
	require.ErrorContains(t, err, "pprof listener on 256.0.0.1:x")
}
