package api

import "github.com/gorilla/mux"

// scheduleRoutes registers its routes under v1 (placeholder until the feature lands).
func (s *server) scheduleRoutes(r *mux.Router, v1 string) {}
