package api

import "github.com/gorilla/mux"

// clusterRoutes registers its routes under v1 (placeholder until the feature lands).
func (s *server) clusterRoutes(_ *mux.Router, _ string) {}
