package handlers

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
)

const cmdSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    "dir": {"type": "string", "pattern": "^/"},
    "mode": {"type": "string", "x-cronix-widget": "select", "enum": ["a", "b"]}
  },
  "required": ["argv"],
  "additionalProperties": false
}`

func TestValidateParams(t *testing.T) {
	t.Parallel()
	require.NoError(t, ValidateParams(json.RawMessage(cmdSchema), json.RawMessage(`{"argv":["ls","-l"],"dir":"/tmp"}`)))
	for params, path := range map[string]string{
		`{}`:                           "",
		`{"argv":[]}`:                  "/argv",
		`{"argv":["ls",3]}`:            "/argv/1",
		`{"argv":["ls"],"dir":"tmp"}`:  "/dir",
		`{"argv":["ls"],"mode":"c"}`:   "/mode",
		`{"argv":["ls"],"extra":true}`: "",
	} {
		err := ValidateParams(json.RawMessage(cmdSchema), json.RawMessage(params))
		var pe *ParamsError
		require.ErrorAs(t, err, &pe, params)
		require.Equal(t, path, pe.Path, "%s: %v", params, err)
		require.NotEmpty(t, pe.Message)
		t.Logf("%s -> %v", params, err)
	}
}

func TestRemoteRefsAreNotFetched(t *testing.T) {
	t.Parallel()
	err := ValidateParams(json.RawMessage(`{"$ref":"http://169.254.169.254/schema.json"}`), json.RawMessage(`{}`))
	var se *SchemaError
	require.ErrorAs(t, err, &se)

	err = ValidateParams(json.RawMessage(`{"type":`), json.RawMessage(`{}`))
	require.ErrorAs(t, err, &se)
}

func TestMergeAndVersions(t *testing.T) {
	t.Parallel()
	got := Merge([]cluster.HandlerInfo{
		{Name: "shell", Version: "1.9.0", Description: "old", Node: "n2"},
		{Name: "shell", Version: "1.10.0", Description: "new", ParamsSchema: json.RawMessage(`{}`), Node: "n1"},
		{Name: "http", Version: "1.0.0", Node: "n1"},
		{Name: "shell", Version: "1.10.0", Description: "new", Node: "n1"},
	})
	require.Equal(t, []Handler{
		{Name: "http", Version: "1.0.0", Nodes: []string{"n1"}},
		{Name: "shell", Version: "1.10.0", Description: "new", ParamsSchema: json.RawMessage(`{}`), Nodes: []string{"n1", "n2"}},
	}, got)
	require.Equal(t, 1, CompareVersions("v2.0", "1.99.99"))
	require.Equal(t, 0, CompareVersions("1.0", "1.0.0"))
	require.Equal(t, -1, CompareVersions("1.0.0-rc1", "1.0.0-rc2"))
}
