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
