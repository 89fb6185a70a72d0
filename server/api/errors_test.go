package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCancelledRequestIsNotLoggedAsAnError: an error that is the request's
// own context ending (its client went away, as a node's results POST does
// when the node stops) is not an "api request failed" error in the log; a
// cancellation while the request is still wanted (some other context) is.
func TestCancelledRequestIsNotLoggedAsAnError(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	s := &server{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest(http.MethodPost, "/api/v1/internal/results", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	s.writeError(w, r, fmt.Errorf("apply 500 results: %w", context.Canceled))
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.JSONEq(t, `{"error":"request cancelled"}`, w.Body.String())
	require.Empty(t, buf.String())

	r = httptest.NewRequest(http.MethodPost, "/api/v1/internal/results", nil)
	w = httptest.NewRecorder()
	s.writeError(w, r, fmt.Errorf("apply 500 results: %w", context.Canceled))
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.Contains(t, buf.String(), "api request failed")

	buf.Reset()
	r = httptest.NewRequest(http.MethodGet, "/api/v1/jobs", nil).WithContext(ctx)
	w = httptest.NewRecorder()
	s.writeError(w, r, errors.New("disk full"))
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.Contains(t, buf.String(), "disk full")
}
