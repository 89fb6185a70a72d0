package auth

import (
	"sync"
	"time"
)

// Throttle defaults.
const (
	// DefaultFreeFailuresPerUser is how many failed logins a user name gets
	// before each further attempt has to wait.
	DefaultFreeFailuresPerUser = 5
	// DefaultFreeFailuresPerAddress is the same per client address (larger:
	// several people may share an address).
	DefaultFreeFailuresPerAddress = 20
	// DefaultThrottleBase is the first delay; it doubles with every further failure.
	DefaultThrottleBase = time.Second
	// DefaultThrottleMax caps the delay.
	DefaultThrottleMax = 15 * time.Minute
	// throttleForget drops a key whose last failure is that old.
	throttleForget = time.Hour
	// throttleMaxKeys bounds the memory a flood of addresses can take.
	throttleMaxKeys = 100_000
)

// Throttle slows down password guessing: per user name and per client
// address it counts failed logins; after the free failures every attempt
// must wait Base × 2^(extra failures − 1), capped at Max, after the last
// failure. A success clears the user name's count. It is in memory, per
// replica. The zero value is ready with the defaults.
type Throttle struct {
	FreePerUser    int
	FreePerAddress int
	Base           time.Duration
	Max            time.Duration

	mu    sync.Mutex
	users map[string]*failures
	addrs map[string]*failures
}

type failures struct {
	count int
	last  time.Time
}

func (t *Throttle) init() {
	if t.users == nil {
		t.users = map[string]*failures{}
		t.addrs = map[string]*failures{}
	}
}

func (t *Throttle) params() (freeUser, freeAddr int, base, max time.Duration) {
	freeUser, freeAddr, base, max = t.FreePerUser, t.FreePerAddress, t.Base, t.Max
	if freeUser <= 0 {
		freeUser = DefaultFreeFailuresPerUser
	}
	if freeAddr <= 0 {
		freeAddr = DefaultFreeFailuresPerAddress
	}
	if base <= 0 {
		base = DefaultThrottleBase
	}
	if max <= 0 {
		max = DefaultThrottleMax
	}
	return
}

// wait is how long after f.last the next attempt must wait.
func wait(f *failures, free int, base, max time.Duration) time.Duration {
	if f == nil || f.count < free {
		return 0
	}
	d := base
	for i := free; i < f.count && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// Check returns how long an attempt for username from addr at now must
// still wait (0 = go ahead).
func (t *Throttle) Check(username, addr string, now time.Time) time.Duration {
	freeUser, freeAddr, base, max := t.params()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	var d time.Duration
	if f := t.users[username]; f != nil {
		d = max2(d, f.last.Add(wait(f, freeUser, base, max)).Sub(now))
	}
	if f := t.addrs[addr]; f != nil {
		d = max2(d, f.last.Add(wait(f, freeAddr, base, max)).Sub(now))
	}
	return d
}

func max2(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

// Failure records a failed login for username from addr at now.
func (t *Throttle) Failure(username, addr string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	t.prune(now)
	for _, m := range []struct {
		m map[string]*failures
		k string
	}{{t.users, username}, {t.addrs, addr}} {
		f := m.m[m.k]
		if f == nil || now.Sub(f.last) > throttleForget {
			f = &failures{}
			m.m[m.k] = f
		}
		f.count++
		f.last = now
	}
}

// Success clears the failures of username.
func (t *Throttle) Success(username string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.init()
	delete(t.users, username)
}

// prune forgets stale keys when the maps grow large.
func (t *Throttle) prune(now time.Time) {
	if len(t.users)+len(t.addrs) < throttleMaxKeys {
		return
	}
	for _, m := range []map[string]*failures{t.users, t.addrs} {
		for k, f := range m {
			if now.Sub(f.last) > throttleForget {
				delete(m, k)
			}
		}
	}
	if len(t.users)+len(t.addrs) >= throttleMaxKeys {
		// Still full of fresh keys: start over rather than grow without bound.
		t.users, t.addrs = map[string]*failures{}, map[string]*failures{}
	}
}
