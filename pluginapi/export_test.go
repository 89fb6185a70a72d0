package pluginapi

// UseStreamPerRun makes h, a host-side Handler from GRPCPlugin (or
// plugintest.Connect), run each run on a Run stream of its own, as it does
// for a plugin that does not serve Runs.
func UseStreamPerRun(h Handler) { h.(*grpcClient).mux.Store(false) }

// UsesRunsStream reports whether h runs its runs on the Runs stream.
func UsesRunsStream(h Handler) bool { return h.(*grpcClient).mux.Load() }
