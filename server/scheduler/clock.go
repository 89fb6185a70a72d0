package scheduler

import "time"

// Clock is the scheduler's source of time, injected so tests need not sleep.
type Clock interface {
	Now() time.Time
	// NewTimer returns a started timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer with Go 1.23 semantics: after Stop or Reset no
// stale time is received.
type Timer interface {
	C() <-chan time.Time
	// Reset rearms the timer to fire after d.
	Reset(d time.Duration)
	// Stop disarms the timer.
	Stop()
}

// RealClock is the wall clock.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time   { return t.t.C }
func (t realTimer) Reset(d time.Duration) { t.t.Reset(d) }
func (t realTimer) Stop()                 { t.t.Stop() }
