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

// HalfSecond is the offset into each second at which periodic background
// passes start (OffBeat): the fires of cron schedules are on whole
// seconds, and at thousands of fires a second their starts, their
// requests and their results fill the first tenths of it; a pass started
// at a free phase drifted by its own duration every second and so ran
// inside that burst every few tens of seconds.
const HalfSecond = 500 * time.Millisecond

// OffBeat is when a periodic pass that last started at last starts next:
// every after last (or now, if that is past), then, for an every of a
// second or more, moved later to the first instant phase into its second.
// A shorter every is not moved.
func OffBeat(last, now time.Time, every, phase time.Duration) time.Time {
	t := last.Add(every)
	if t.Before(now) {
		t = now
	}
	if every < time.Second {
		return t
	}
	d := phase - t.Sub(t.Truncate(time.Second))
	if d < 0 {
		d += time.Second
	}
	return t.Add(d)
}
