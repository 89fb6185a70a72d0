package health_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/health"
)

func get(t *testing.T, h http.Handler) (int, health.Report) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var rep health.Report
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &rep))
	return rec.Code, rep
}

func TestReadyNamesTheFailingCheck(t *testing.T) {
	t.Parallel()
	c := &health.Checker{}
	c.Add("sql", func(context.Context) error { return nil })
	c.Add("leader", func(context.Context) error { return errors.New("no raft leader known") })

	code, rep := get(t, c.ReadyHandler())
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, health.Report{Status: "not ready", Failing: []string{"leader"},
		Checks: map[string]string{"sql": "ok", "leader": "no raft leader known"}}, rep)
	require.ErrorContains(t, rep.Err(), "leader: no raft leader known")

	c.Add("leader", func(context.Context) error { return nil }) // replaced, not added twice
	code, rep = get(t, c.ReadyHandler())
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, health.Report{Status: "ready", Checks: map[string]string{"sql": "ok", "leader": "ok"}}, rep)
	require.NoError(t, rep.Err())
}

func TestCheckTimesOutAHangingCheck(t *testing.T) {
	t.Parallel()
	c := &health.Checker{Timeout: 50 * time.Millisecond}
	c.Add("etcd", func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	})
	rep := c.Check(context.Background())
	require.False(t, rep.Ready())
	require.Equal(t, []string{"etcd"}, rep.Failing)
	require.Contains(t, rep.Checks["etcd"], "deadline exceeded")
}

func TestWaitReturnsWhenReadyOrGivesUp(t *testing.T) {
	t.Parallel()
	ready := make(chan struct{})
	c := &health.Checker{}
	c.Add("node_registered", func(context.Context) error {
		select {
		case <-ready:
			return nil
		default:
			return errors.New("node n1 is not registered in etcd")
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := c.Wait(ctx, 10*time.Millisecond)
	require.ErrorContains(t, err, "node_registered: node n1 is not registered")
	require.ErrorIs(t, err, context.DeadlineExceeded)

	close(ready)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	require.NoError(t, c.Wait(ctx2, 10*time.Millisecond))
}

func TestLiveHandler(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	health.LiveHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	require.JSONEq(t, `{"status":"ok"}`, rec.Body.String())
}
