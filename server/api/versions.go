package api

import "github.com/gorilla/mux"

// versionRoutes registers its routes under v1 (placeholder until the feature lands).
func (s *server) versionRoutes(_ *mux.Router, _ string) {}
