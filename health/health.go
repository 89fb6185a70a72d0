// Package health answers the two questions a supervisor asks a Cronix
// process: is it alive (/healthz: the process serves HTTP, nothing else is
// checked) and is it ready (/readyz: every named readiness check passes).
// Both answer JSON; /readyz answers 503 naming each failing check and why.
package health

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"
)

// DefaultTimeout bounds each check of a Checker whose Timeout is 0.
const DefaultTimeout = 2 * time.Second

// Status values of a Report.
const (
	StatusOK       = "ok"
	StatusReady    = "ready"
	StatusNotReady = "not ready"
)

// CheckFunc reports why its part is not ready, or nil. It must return when
// ctx ends.
type CheckFunc func(ctx context.Context) error

// Checker runs named readiness checks. The zero value is ready to use; it
// is safe for concurrent use and checks may be added while it serves.
type Checker struct {
	// Timeout bounds each check; 0 means DefaultTimeout.
	Timeout time.Duration

	mu     sync.Mutex
	names  []string
	checks map[string]CheckFunc
}

// Add registers (or replaces) the check called name.
func (c *Checker) Add(name string, fn CheckFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.checks == nil {
		c.checks = map[string]CheckFunc{}
	}
	if _, ok := c.checks[name]; !ok {
		c.names = append(c.names, name)
	}
	c.checks[name] = fn
}

// Report is the body of /readyz.
type Report struct {
	// Status is "ready" or "not ready".
	Status string `json:"status"`
	// Checks maps every check to "ok" or why it fails.
	Checks map[string]string `json:"checks"`
	// Failing names the failing checks, sorted; absent when ready.
	Failing []string `json:"failing,omitempty"`
}

// Ready reports whether every check passed.
func (r Report) Ready() bool { return r.Status == StatusReady }

// Err is nil when ready, else an error naming each failing check.
func (r Report) Err() error {
	var errs []error
	for _, n := range r.Failing {
		errs = append(errs, errors.New(n+": "+r.Checks[n]))
	}
	return errors.Join(errs...)
}

// Check runs every check concurrently, each bounded by the timeout, and
// waits for all of them.
func (c *Checker) Check(ctx context.Context) Report {
	c.mu.Lock()
	names := slices.Clone(c.names)
	fns := make([]CheckFunc, len(names))
	for i, n := range names {
		fns[i] = c.checks[n]
	}
	timeout := c.Timeout
	c.mu.Unlock()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			errs[i] = fns[i](cctx)
		}()
	}
	wg.Wait()
	r := Report{Status: StatusReady, Checks: make(map[string]string, len(names))}
	for i, n := range names {
		if errs[i] == nil {
			r.Checks[n] = StatusOK
			continue
		}
		r.Checks[n] = errs[i].Error()
		r.Failing = append(r.Failing, n)
	}
	if len(r.Failing) > 0 {
		r.Status = StatusNotReady
		sort.Strings(r.Failing)
	}
	return r
}

// Wait polls Check every interval until it is ready (nil) or ctx ends (the
// last report's error joined with ctx's).
func (c *Checker) Wait(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		r := c.Check(ctx)
		if r.Ready() {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(r.Err(), ctx.Err())
		case <-t.C:
		}
	}
}

// ReadyHandler serves /readyz: 200 with the report when ready, else 503.
func (c *Checker) ReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep := c.Check(r.Context())
		code := http.StatusOK
		if !rep.Ready() {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, rep)
	})
}

// LiveHandler serves /healthz: 200 {"status":"ok"} while the process serves HTTP.
func LiveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": StatusOK})
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
