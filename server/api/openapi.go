package api

import (
	_ "embed"
	"net/http"

	"github.com/gorilla/mux"
)

// openAPIDocument is the OpenAPI 3 description of every /api/v1 route (and
// of /healthz and the xxl-job compatible routes). openapi_test.go keeps its
// operations equal to the routes the router serves: a route added without
// documenting it fails the tests.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPIPath is where the OpenAPI document is served, without authentication.
const OpenAPIPath = "/api/v1/openapi.json"

// OpenAPIDocument returns a copy of the OpenAPI 3 document served at OpenAPIPath.
func OpenAPIDocument() []byte {
	return append([]byte(nil), openAPIDocument...)
}

// openAPIRoutes registers GET /api/v1/openapi.json (no authentication, so
// tools can fetch it).
func (s *server) openAPIRoutes(r *mux.Router, v1 string) {
	r.Handle(v1+"/openapi.json", http.HandlerFunc(serveOpenAPI)).Methods(http.MethodGet)
}

// serveOpenAPI writes the embedded document.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
