package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/alert"
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

// TestDecodeJSONNamesTheField: whatever makes a body fail to decode — a
// type mismatch, an unknown field, a value its type's own UnmarshalJSON
// refuses (a time, a duration) — the 400 names the field by its JSON path,
// nested fields and array elements included; so does a NUL character in a
// string or a map key. Syntax errors and a body that is no object keep
// their messages.
func TestDecodeJSONNamesTheField(t *testing.T) {
	t.Parallel()
	nul := ` must not contain a NUL character (\u0000)`
	for _, tc := range []struct {
		body   string
		dst    func() any
		strict bool
		fields map[string]string
		msg    string // the error message when no field is named
	}{
		{`{"name":"z","expires_at":"garbage"}`, func() any { return &TokenRequest{} }, true,
			map[string]string{"expires_at": timeMessage}, ""},
		{`{"expires_at":5}`, func() any { return &TokenRequest{} }, true,
			map[string]string{"expires_at": timeMessage}, ""},
		{`{"throttle_window":"abc"}`, func() any { return &alert.Settings{} }, true,
			map[string]string{"throttle_window": `want a duration such as "10m": time: invalid duration "abc"`}, ""},
		{`{"smtp":{"port":"x"}}`, func() any { return &alert.Settings{} }, true,
			map[string]string{"smtp.port": "must be an integer, not string"}, ""},
		{`{"webhooks":[{"name":"a"},{"url":5}]}`, func() any { return &alert.Settings{} }, true,
			map[string]string{"webhooks[1].url": "must be a string, not number"}, ""},
		{`{"smtp":{"bogus":1}}`, func() any { return &alert.Settings{} }, true,
			map[string]string{"smtp.bogus": "unknown field"}, ""},
		{`{"group_emails":{"ops":"x"}}`, func() any { return &alert.Settings{} }, true,
			map[string]string{"group_emails.ops": "must be an array, not string"}, ""},
		{`{"jobs":[{"name":"a"},{"timeout_seconds":"ten"}]}`, func() any { return &JobBatchRequest{} }, true,
			map[string]string{"jobs[1].timeout_seconds": "must be an integer, not string"}, ""},
		{`{"node":"n","events":[{"kind":"stale_term"},{"at":"yesterday","extra":1}]}`,
			func() any { return &cluster.SecurityEventBatch{} }, false,
			map[string]string{"events[1].at": timeMessage}, ""},
		{`{"retries":3}`, func() any { return &JobRequest{} }, true, map[string]string{"retries": "unknown field"}, ""},
		{`{"enabled":"yes"}`, func() any { return &JobRequest{} }, true,
			map[string]string{"enabled": "must be a boolean, not string"}, ""},
		{`[1,2]`, func() any { return &JobRequest{} }, true, nil, "request body must be a JSON object"},
		{`{"name":"x",`, func() any { return &JobRequest{} }, true, nil, "malformed JSON: unexpected end of body"},
		{`{"name":"x"} {}`, func() any { return &JobRequest{} }, true, nil, "malformed JSON: unexpected data after the object"},
		// NUL characters: values, nested values, map keys, array elements.
		{`{"title":"a\u0000b"}`, func() any { return &GroupRequest{} }, true, map[string]string{"title": "title" + nul}, ""},
		{`{"addresses":["ok","n\u0000"]}`, func() any { return &GroupRequest{} }, true,
			map[string]string{"addresses": "addresses" + nul}, ""},
		{`{"group_emails":{"o\u0000":["a@example.com"]}}`, func() any { return &alert.Settings{} }, true,
			map[string]string{"group_emails": "group_emails keys" + nul}, ""},
		{`{"group_emails":{"ops":["a\u0000@example.com"]}}`, func() any { return &alert.Settings{} }, true,
			map[string]string{"group_emails.ops": "ops" + nul}, ""},
		{`{"webhooks":[{"name":"a","url":"http://x"},{"name":"b","url":"http://y\u0000"}],"smtp":{"host":"\u0000"}}`,
			func() any { return &alert.Settings{} }, true,
			map[string]string{"webhooks[1].url": "url" + nul, "smtp.host": "host" + nul}, ""},
		{`{"node":"n","events":[{"kind":"stale_term","reason":"r\u0000"}],"unknown":"\u0000"}`,
			func() any { return &cluster.SecurityEventBatch{} }, false,
			map[string]string{"events[0].reason": "reason" + nul}, ""},
	} {
		r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(tc.body))
		err := decodeJSON(r, tc.dst(), tc.strict)
		var ve *ValidationError
		require.ErrorAs(t, err, &ve, tc.body)
		require.Equal(t, tc.fields, ve.Fields, tc.body)
		if tc.msg != "" {
			require.Equal(t, tc.msg, ve.Message, tc.body)
		}
	}

	// What decodes is left alone: job params are the handler's to judge,
	// a run's output may hold any byte.
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(`{"name":"j","params":{"env":{"A":"x\u0000"}}}`))
	require.NoError(t, decodeJSON(r, &JobRequest{}, true))
	r = httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(`{"results":[{"fire_id":"1-1","output":"a\u0000","message":"\u0000"}]}`))
	require.NoError(t, decodeJSON(r, &cluster.ResultBatch{}, false))
}
