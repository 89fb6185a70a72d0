package node_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/integration/harness"
	"github.com/cronix/cronix/node"
	"github.com/cronix/cronix/node/pluginhost"
)

const testToken = "node-token"

// shellHost starts a plugin host running the real shell plugin binary,
// built into the test's temp dir.
func shellHost(t *testing.T) *pluginhost.Host {
	t.Helper()
	bin, err := harness.BuildPackage(context.Background(), filepath.Join(t.TempDir(), "cronix-plugin-shell"),
		"./plugins/shell/cmd/cronix-plugin-shell")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := pluginhost.New(nil, []pluginhost.Spec{{Name: "shell", Cmd: []string{bin}}})
	require.NoError(t, h.Start(ctx))
	t.Cleanup(h.Stop)
	require.Empty(t, h.Failures())
	return h
}

func TestValidateHandler(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("POST "+node.ValidatePath, node.ValidateHandler(shellHost(t), testToken))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	post := func(t *testing.T, handler, token, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/handlers/"+handler+"/validate", strings.NewReader(body))
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		var out map[string]any
		require.NoError(t, json.Unmarshal(raw, &out), "body: %s", raw)
		return resp.StatusCode, out
	}

	t.Run("token required", func(t *testing.T) {
		t.Parallel()
		for _, tok := range []string{"", "wrong", testToken + "x"} {
			code, out := post(t, "shell", tok, `{"script":"echo hi"}`)
			require.Equal(t, http.StatusUnauthorized, code, "token %q", tok)
			require.NotEmpty(t, out["error"])
		}
	})

	t.Run("empty configured token rejects all", func(t *testing.T) {
		t.Parallel()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/handlers/shell/validate", strings.NewReader(`{"script":"x"}`))
		req.Header.Set("Authorization", "Bearer ")
		node.ValidateHandler(nil, "").ServeHTTP(rec, req)
		require.Equal(t, http.StatusUnauthorized, rec.Code)
	})

	t.Run("valid params", func(t *testing.T) {
		t.Parallel()
		code, out := post(t, "shell", testToken, `{"script":"echo hi","interpreter":"bash"}`)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, map[string]any{"ok": true}, out)
	})

	t.Run("plugin rejects", func(t *testing.T) {
		t.Parallel()
		// The schema's minLength allows a blank script; the plugin does not.
		code, out := post(t, "shell", testToken, `{"script":"   "}`)
		require.Equal(t, http.StatusUnprocessableEntity, code)
		require.Equal(t, map[string]any{"ok": false, "field": "script", "message": "must not be empty"}, out)

		code, out = post(t, "shell", testToken, `{"script":"echo","env":{"A":"x\u0000y"}}`)
		require.Equal(t, http.StatusUnprocessableEntity, code)
		require.Equal(t, "env.A", out["field"])
		require.Equal(t, false, out["ok"])
	})

	t.Run("unknown handler", func(t *testing.T) {
		t.Parallel()
		code, out := post(t, "nope", testToken, `{}`)
		require.Equal(t, http.StatusBadGateway, code)
		require.Contains(t, out["error"], "unknown handler")
	})

	t.Run("bad bodies", func(t *testing.T) {
		t.Parallel()
		for _, body := range []string{``, `[]`, `"x"`, `{"script":`} {
			code, out := post(t, "shell", testToken, body)
			require.Equal(t, http.StatusBadRequest, code, "body %q", body)
			require.Equal(t, "params must be a JSON object", out["error"])
		}
		big := `{"script":"` + strings.Repeat("x", node.MaxValidateBodyBytes) + `"}`
		code, out := post(t, "shell", testToken, big)
		require.Equal(t, http.StatusRequestEntityTooLarge, code)
		require.NotEmpty(t, out["error"])
	})
}
