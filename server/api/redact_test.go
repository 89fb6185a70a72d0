package api

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedactJSONHidesSecretsAtAnyDepth(t *testing.T) {
	t.Parallel()
	diff := map[string]any{
		"description": map[string]any{"from": "a", "to": "b"},
		"params": map[string]any{"from": map[string]any{"url": "https://x", "headers": map[string]any{"Authorization": "Bearer s1"},
			"env": map[string]any{"DB_PASSWORD": "p1", "HOME": "/root"}, "api_key": "k1"},
			"to": map[string]any{"url": "https://x", "headers": map[string]any{"Authorization": "Bearer s2"}}},
		"smtp_password": map[string]any{"from": nil, "to": "p2"},
		"tokens":        []any{map[string]any{"secret": "s3"}},
	}
	b, err := redactJSON(diff)
	require.NoError(t, err)
	for _, leak := range []string{"s1", "s2", "p1", "p2", "k1", "s3"} {
		require.NotContains(t, string(b), `"`+leak+`"`)
		require.NotContains(t, string(b), " "+leak)
	}
	var got map[string]any
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, map[string]any{"from": "a", "to": "b"}, got["description"], "other fields untouched")
	p := got["params"].(map[string]any)["from"].(map[string]any)
	require.Equal(t, "https://x", p["url"])
	require.Equal(t, "/root", p["env"].(map[string]any)["HOME"])
	require.Equal(t, redacted, p["env"].(map[string]any)["DB_PASSWORD"])
	require.Equal(t, map[string]any{"from": nil, "to": redacted}, got["smtp_password"], "a diff keeps its shape; null stays null")
}
