package benchreport

import (
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReceiverAnswersNoContent: without a handler the receiver answers
// 204 to any path; after Close it refuses connections.
func TestReceiverAnswersNoContent(t *testing.T) {
	rec, err := StartReceiver(nil)
	require.NoError(t, err)
	for _, path := range []string{"/", "/j/7"} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, rec.URL(path), nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusNoContent, resp.StatusCode, path)
	}
	rec.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, rec.URL("/"), nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_ = resp.Body.Close()
	}
	require.Error(t, err, "closed")
}

// TestArrivalIsTheSocketsReceiveTime: on Linux a request's Arrival is the
// kernel's receive timestamp of its bytes: after it was sent, not after the
// handler ran.
func TestArrivalIsTheSocketsReceiveTime(t *testing.T) {
	type seen struct {
		arrival, handler time.Time
		ok               bool
	}
	got := make(chan seen, 2)
	rec, err := StartReceiver(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		a, ok := Arrival(req)
		got <- seen{a, time.Now(), ok}
	}))
	require.NoError(t, err)
	defer rec.Close()
	// The kernel turns its receive timestamps on a moment after the first
	// socket asks (a deferred global switch, which took longer than one
	// request on a loaded VM): the first requests may have none, a later
	// one on the same connection must, within the deadline.
	var s seen
	var sent time.Time
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 2 || (!s.ok && runtime.GOOS == "linux" && time.Now().Before(deadline)); i++ {
		sent = time.Now()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, rec.URL("/j/1"), nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		s = <-got
	}
	if runtime.GOOS != "linux" {
		require.False(t, s.ok)
		return
	}
	require.True(t, s.ok, "a receive timestamp within 10s of requests")
	require.False(t, s.arrival.Before(sent), "arrival %s before the request was sent %s", s.arrival, sent)
	require.False(t, s.arrival.After(s.handler), "arrival %s after the handler ran %s", s.arrival, s.handler)
}
