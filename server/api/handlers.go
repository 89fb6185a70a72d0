package api

import "github.com/gorilla/mux"

// handlerRoutes registers its routes under v1 (placeholder until the feature lands).
func (s *server) handlerRoutes(r *mux.Router, v1 string) {}
