package embedetcd

import "go.uber.org/zap"

// nopLogger keeps the etcd client quiet; Cronix logs its own errors.
func nopLogger() *zap.Logger { return zap.NewNop() }
