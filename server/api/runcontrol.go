package api

import "github.com/gorilla/mux"

// runControlRoutes registers its routes under v1 (placeholder until the feature lands).
func (s *server) runControlRoutes(r *mux.Router, v1 string) {}
