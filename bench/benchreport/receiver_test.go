package benchreport

import (
	"net/http"
	"testing"

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
