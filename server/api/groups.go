package api

import "github.com/gorilla/mux"

// groupRoutes registers its routes under v1 (placeholder until the feature lands).
func (s *server) groupRoutes(r *mux.Router, v1 string) {}
