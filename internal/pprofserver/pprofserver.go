// Package pprofserver serves Go's net/http/pprof handlers on a listener of
// their own, for profiling a running Cronix process (the --pprof-addr flag
// of "cronix standalone", "cronix server" and "cronix node"). It is off by
// default: the endpoints have no authentication and reveal the process's
// internals, so the address should be a loopback one. While a Server runs,
// block and mutex profiling are on (runtime.SetBlockProfileRate and
// runtime.SetMutexProfileFraction), which costs a little on every
// contended lock and blocking channel operation; Close turns them off.
package pprofserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"
)

const (
	// BlockProfileRate is the runtime.SetBlockProfileRate value while a
	// Server runs: one sample per 10 µs spent blocked, on average.
	BlockProfileRate = 10_000
	// MutexProfileFraction is the runtime.SetMutexProfileFraction value
	// while a Server runs: one contention event in 5 is sampled.
	MutexProfileFraction = 5
)

// Server is a running pprof listener.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	prev int // previous mutex profile fraction
}

// Handler returns the pprof routes under /debug/pprof/.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// Start listens on addr (host:port; port 0 picks a free one), turns block
// and mutex profiling on and serves the pprof routes until Close or until
// ctx is done.
func Start(ctx context.Context, addr string, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.Default()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof listener on %s: %w", addr, err)
	}
	s := &Server{
		// No write timeout: /debug/pprof/profile and /trace stream for as
		// many seconds as asked.
		srv:  &http.Server{Handler: Handler(), ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan struct{}),
	}
	runtime.SetBlockProfileRate(BlockProfileRate)
	s.prev = runtime.SetMutexProfileFraction(MutexProfileFraction)
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof: serving", "addr", ln.Addr().String(), "err", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	log.Warn("pprof: profiling endpoints served without authentication", "url", "http://"+ln.Addr().String()+"/debug/pprof/")
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the listener, waits for the serving goroutine and turns
// block and mutex profiling off again. It is safe to call more than once.
func (s *Server) Close() {
	_ = s.srv.Close()
	<-s.done
	runtime.SetBlockProfileRate(0)
	runtime.SetMutexProfileFraction(s.prev)
}
