package api_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// fuzzRoutes are the API routes that decode a JSON body, with the bearer
// token each needs ("node" = the node token, else the admin's).
var fuzzRoutes = []struct {
	method, path string
	node         bool
}{
	{http.MethodPost, "/api/v1/jobs", false},
	{http.MethodPut, "/api/v1/jobs/1", false},
	{http.MethodPost, "/api/v1/jobs/1/trigger", false},
	{http.MethodPost, "/api/v1/groups", false},
	{http.MethodPut, "/api/v1/groups/1", false},
	{http.MethodPost, "/api/v1/auth/login", false},
	{http.MethodPost, "/api/v1/internal/results", true},
}

// FuzzJSONBodies sends arbitrary bodies to every JSON-decoding route of a
// real API server (SQLite, embedded etcd): whatever the body, the answer is
// never a 5xx (bad input is a 4xx) and the server keeps serving. `make
// test` runs it briefly; its seeds run with every `go test`.
func FuzzJSONBodies(f *testing.F) {
	b := setup(f)
	// One job and one group for the PUT and trigger routes.
	b.doJSON(http.MethodPost, "/api/v1/jobs", b.token, validJob(), http.StatusCreated, nil)
	b.doJSON(http.MethodPost, "/api/v1/groups", b.token, map[string]any{"appname": "fuzz"}, http.StatusCreated, nil)
	seeds := []string{
		``, `{}`, `[]`, `null`, `"x"`, `{"name":1}`, `{"name":"a\u0000b"}`, `{} {}`, `{"x":`,
		`{"name":"j","schedule":"*/5 * * * *","handler":"shell","params":{"script":"echo"}}`,
		`{"name":"j","schedule_type":"once","schedule":"2000-01-01T00:00:00Z","handler":"shell"}`,
		`{"name":"j","schedule":"0 0 0 31 2 ?","handler":"shell","timeout_seconds":-1}`,
		`{"appname":"g","title":"t","addresses":["127.0.0.1:1"]}`,
		`{"username":"admin","password":"x"}`,
		`{"results":[{"fire_id":"1-1","job_id":1,"status":"success"}]}`,
		`{"results":[{"fire_id":"-","job_id":9223372036854775807,"status":"lost"}]}`,
		`{"node":"n1"}`, `{"executor_param":"` + string(bytes.Repeat([]byte("a"), 300)) + `"}`,
	}
	for i := range fuzzRoutes {
		for _, s := range seeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		req, err := http.NewRequestWithContext(t.Context(), rt.method, b.srv.URL+rt.path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		token := b.token
		if rt.node {
			token = nodeToken
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := b.srv.Client().Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", rt.method, rt.path, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s with body %q: %d %s", rt.method, rt.path, body, resp.StatusCode, raw)
		}
		if resp.StatusCode >= 400 && !bytes.Contains(raw, []byte(`"error"`)) {
			t.Fatalf("%s %s: %d without an error body: %s", rt.method, rt.path, resp.StatusCode, raw)
		}
	})
}
