package waitctx

import (
	"context"
	"testing"
	"time"
)

func TestSleepAndUntil(t *testing.T) {
	t.Parallel()
	start := time.Now()
	if !Sleep(context.Background(), 20*time.Millisecond) || time.Since(start) < 20*time.Millisecond {
		t.Fatal("Sleep returned before its duration")
	}
	at := time.Now().Add(20 * time.Millisecond)
	if !Until(context.Background(), at) || time.Now().Before(at) {
		t.Fatal("Until returned before its time")
	}
	if !Until(context.Background(), time.Now().Add(-time.Hour)) {
		t.Fatal("a past time comes at once")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) || Until(ctx, time.Now().Add(time.Hour)) {
		t.Fatal("a done context ends the wait")
	}
}

func TestOffBeat(t *testing.T) {
	t.Parallel()
	sec := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return sec.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name      string
		last, now int // ms after sec
		every     time.Duration
		want      int
	}{
		{"a pass at the phase starts a period later", 500, 530, time.Second, 1500},
		{"a pass off the phase moves to the next phase", 120, 180, time.Second, 1500},
		{"just past the phase waits for the next second's", 510, 540, time.Second, 2500},
		{"a pass that overran starts at the next phase after now", 500, 2700, time.Second, 3500},
		{"longer periods keep the phase", 500, 600, 5 * time.Second, 5500},
		{"a period under a second is not moved", 120, 130, 100 * time.Millisecond, 220},
		{"nor when it overran", 120, 400, 100 * time.Millisecond, 400},
	} {
		got := OffBeat(at(tc.last), at(tc.now), tc.every, HalfSecond)
		if !got.Equal(at(tc.want)) {
			t.Errorf("%s: OffBeat(+%dms, now +%dms, %s) = +%s, want +%dms", tc.name, tc.last, tc.now, tc.every,
				got.Sub(sec), tc.want)
		}
	}
}
