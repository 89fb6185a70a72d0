package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/mux"
	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/auth"
)

// openAPIDoc is the part of an OpenAPI 3 document these tests read.
type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components map[string]map[string]json.RawMessage `json:"components"`
}

// openAPIMethods are the path item keys that are operations.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

func parseOpenAPI(t *testing.T, b []byte) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	require.NoError(t, json.Unmarshal(b, &doc), "openapi.json must be valid JSON")
	return doc
}

// testRouter is the router New serves /api with, built without a store or
// etcd: handlers are never run by the route walk.
func testRouter() *mux.Router {
	s := &server{log: slog.New(slog.DiscardHandler), loc: time.UTC, now: time.Now, throttle: &auth.Throttle{}}
	return s.routes()
}

// muxVar matches a mux path variable with a pattern, {id:[0-9]+}.
var muxVar = regexp.MustCompile(`\{([^{}:]+):[^{}]*\}`)

// servedOperations walks the router: "METHOD /path/{var}" for every route under /api/v1.
func servedOperations(t *testing.T, r *mux.Router) map[string]bool {
	t.Helper()
	ops := map[string]bool{}
	err := r.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		tpl, err := route.GetPathTemplate()
		if err != nil {
			return nil //nolint:nilerr // a route without a path (none today) is not an operation
		}
		if tpl != "/api/v1" && !strings.HasPrefix(tpl, "/api/v1/") {
			return nil
		}
		methods, err := route.GetMethods()
		require.NoError(t, err, "route %s has no methods: every /api/v1 route must name its methods", tpl)
		path := muxVar.ReplaceAllString(tpl, "{$1}")
		for _, m := range methods {
			ops[strings.ToUpper(m)+" "+path] = true
		}
		return nil
	})
	require.NoError(t, err)
	return ops
}

// documentedOperations lists "METHOD /path" for every operation of doc under /api/v1.
func documentedOperations(doc openAPIDoc) map[string]bool {
	ops := map[string]bool{}
	for path, item := range doc.Paths {
		if path != "/api/v1" && !strings.HasPrefix(path, "/api/v1/") {
			continue
		}
		for key := range item {
			if slices.Contains(openAPIMethods, key) {
				ops[strings.ToUpper(key)+" "+path] = true
			}
		}
	}
	return ops
}

// missing returns the keys of a that are not in b, sorted.
func missing(a, b map[string]bool) []string {
	var out []string
	for k := range a {
		if !b[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	served := servedOperations(t, testRouter())
	documented := documentedOperations(parseOpenAPI(t, openAPIDocument))
	require.NotEmpty(t, served)
	// Sanity: the walk sees routes registered in routes() itself and in the route-group files.
	for _, op := range []string{"POST /api/v1/auth/login", "GET /api/v1/jobs/{id}", "GET /api/v1/groups/{id}",
		"POST /api/v1/runs/{id}/kill", "GET /api/v1/openapi.json", "POST /api/v1/internal/results"} {
		require.True(t, served[op], "router walk does not see %s", op)
	}

	undocumented := missing(served, documented)
	notServed := missing(documented, served)
	if len(undocumented) > 0 || len(notServed) > 0 {
		t.Fatalf("server/api/openapi.json does not match the router.\n"+
			"Served but not documented (add them to openapi.json):\n  %s\n"+
			"Documented but not served (remove them, or register the route):\n  %s",
			orNone(undocumented), orNone(notServed))
	}
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, "\n  ")
}

func TestOpenAPIDocumentIsWellFormed(t *testing.T) {
	t.Parallel()
	doc := parseOpenAPI(t, openAPIDocument)
	require.Regexp(t, `^3\.\d+\.\d+$`, doc.OpenAPI)
	require.NotEmpty(t, doc.Paths)

	pathVar := regexp.MustCompile(`\{([^{}]+)\}`)
	operationIDs := map[string]string{}
	for path, item := range doc.Paths {
		require.True(t, strings.HasPrefix(path, "/"), "path %q must start with /", path)
		declared := paramNames(t, doc, item["parameters"])
		nops := 0
		for key, raw := range item {
			if !slices.Contains(openAPIMethods, key) {
				require.Contains(t, []string{"parameters", "summary", "description", "servers"}, key, "path %s: unknown key", path)
				continue
			}
			nops++
			where := strings.ToUpper(key) + " " + path
			var op struct {
				OperationID string                     `json:"operationId"`
				Parameters  json.RawMessage            `json:"parameters"`
				Responses   map[string]json.RawMessage `json:"responses"`
			}
			require.NoError(t, json.Unmarshal(raw, &op), where)
			require.NotEmpty(t, op.Responses, "%s has no responses", where)
			for code := range op.Responses {
				require.Regexp(t, `^([1-5]\d\d|[1-5]XX|default)$`, code, "%s: bad response code", where)
			}
			require.NotEmpty(t, op.OperationID, "%s has no operationId", where)
			prev, dup := operationIDs[op.OperationID]
			require.False(t, dup, "operationId %q used by %s and %s", op.OperationID, prev, where)
			operationIDs[op.OperationID] = where

			params := paramNames(t, doc, op.Parameters)
			for _, m := range pathVar.FindAllStringSubmatch(path, -1) {
				require.True(t, declared["path:"+m[1]] || params["path:"+m[1]],
					"%s: path parameter %q is not declared", where, m[1])
			}
		}
		require.Positive(t, nops, "path %s has no operations", path)
	}

	// Every $ref points at a component that exists.
	var all any
	require.NoError(t, json.Unmarshal(openAPIDocument, &all))
	walkRefs(all, func(ref string) {
		kind, name, ok := strings.Cut(strings.TrimPrefix(ref, "#/components/"), "/")
		require.True(t, ok && strings.HasPrefix(ref, "#/components/"), "unsupported $ref %q", ref)
		_, found := doc.Components[kind][name]
		require.True(t, found, "$ref %q points at nothing", ref)
	})
}

// paramNames returns "in:name" for a parameters list, resolving $refs.
func paramNames(t *testing.T, doc openAPIDoc, raw json.RawMessage) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	if len(raw) == 0 {
		return out
	}
	var params []struct {
		Ref  string `json:"$ref"`
		Name string `json:"name"`
		In   string `json:"in"`
	}
	require.NoError(t, json.Unmarshal(raw, &params))
	for _, p := range params {
		if p.Ref != "" {
			name := strings.TrimPrefix(p.Ref, "#/components/parameters/")
			comp, ok := doc.Components["parameters"][name]
			require.True(t, ok, "parameter $ref %q points at nothing", p.Ref)
			require.NoError(t, json.Unmarshal(comp, &p))
		}
		out[p.In+":"+p.Name] = true
	}
	return out
}

// walkRefs calls fn with every "$ref" string value in v.
func walkRefs(v any, fn func(string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "$ref" {
				fn(s)
				continue
			}
			walkRefs(e, fn)
		}
	case []any:
		for _, e := range v {
			walkRefs(e, fn)
		}
	}
}

func TestOpenAPIServedWithoutAuth(t *testing.T) {
	t.Parallel()
	router := testRouter()

	rec := httptest.NewRecorder()
	router.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, OpenAPIPath, nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.JSONEq(t, string(openAPIDocument), rec.Body.String())
	require.Equal(t, openAPIDocument, OpenAPIDocument())

	// A wrong method is the API's usual JSON 405.
	rec = httptest.NewRecorder()
	router.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, OpenAPIPath, nil))
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	var e ErrorResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &e))
	require.NotEmpty(t, e.Error)

	// Authenticated routes stay authenticated (the document route is the exception).
	rec = httptest.NewRecorder()
	router.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/handlers", nil))
	require.Equal(t, http.StatusUnauthorized, rec.Code)
}
