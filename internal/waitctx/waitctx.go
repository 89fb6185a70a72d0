// Package waitctx waits for a time unless a context ends first: the one
// cancellable sleep of the node agent, the plugin host, the alert
// service, the store's checkpointer and the built-in http handler (the
// plugin SDK keeps its own: it imports no Cronix package).
package waitctx

import (
	"context"
	"time"
)

// Sleep waits d or until ctx is done; it reports whether d elapsed (a d
// of 0 or less elapses at once, unless ctx is already done).
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Until waits until t or until ctx is done; it reports whether t came. A
// t already past comes at once.
func Until(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	return Sleep(ctx, d)
}
