package api

import "github.com/gorilla/mux"

// openAPIRoutes registers its routes under v1 (placeholder until the feature lands).
func (s *server) openAPIRoutes(_ *mux.Router, _ string) {}
