package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cronix/cronix/cluster"
)

// prober is the leader-side FAILOVER beat: every interval it GETs
// <node base URL>/healthz (http or https) of each live node concurrently, each with
// a timeout, and remembers whose last beat failed. It runs while the loop
// runs (start/stop), on the wall clock: a beat is real network I/O.
type prober struct {
	client   *http.Client
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger
	rounds   *atomic.Int64 // completed rounds (tests wait on it)

	mu      sync.Mutex
	targets map[string]string // live node uuid → base URL
	failed  map[string]bool   // node uuid → its last beat failed

	cancel context.CancelFunc
	done   chan struct{}
}

func newProber(cfg Config, log *slog.Logger, rounds *atomic.Int64) *prober {
	return &prober{
		client:   cfg.HTTPClient,
		interval: cfg.BeatInterval,
		timeout:  cfg.BeatTimeout,
		log:      log,
		rounds:   rounds,
		targets:  map[string]string{},
		failed:   map[string]bool{},
	}
}

// setNodes replaces the nodes to probe; results of nodes no longer live
// are forgotten (a node that comes back counts as healthy until probed).
func (p *prober) setNodes(nodes map[string]cluster.NodeInfo) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.targets = make(map[string]string, len(nodes))
	for uuid, n := range nodes {
		p.targets[uuid] = n.BaseURL()
	}
	for uuid := range p.failed {
		if _, ok := nodes[uuid]; !ok {
			delete(p.failed, uuid)
		}
	}
}

// healthy reports whether the node's last beat succeeded; a node never
// probed, or any node while beats are off (nil prober), is healthy.
func (p *prober) healthy(uuid string) bool {
	if p == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.failed[uuid]
}

// start runs the beat goroutine until ctx ends or stop.
func (p *prober) start(ctx context.Context) {
	if p == nil || p.done != nil {
		return
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(p.interval)
		defer t.Stop()
		for {
			p.round(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// stop ends the beat goroutine and waits for it; idempotent.
func (p *prober) stop() {
	if p == nil || p.done == nil {
		return
	}
	p.cancel()
	<-p.done
}

// round probes every live node once, concurrently.
func (p *prober) round(ctx context.Context) {
	p.mu.Lock()
	targets := make(map[string]string, len(p.targets))
	for uuid, addr := range p.targets {
		targets[uuid] = addr
	}
	p.mu.Unlock()

	var (
		wg      sync.WaitGroup
		resMu   sync.Mutex
		results = make(map[string]error, len(targets))
	)
	for uuid, addr := range targets {
		wg.Go(func() {
			err := p.beat(ctx, addr)
			resMu.Lock()
			results[uuid] = err
			resMu.Unlock()
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // cancelled beats say nothing about the nodes
	}

	p.mu.Lock()
	for uuid, err := range results {
		if _, live := p.targets[uuid]; !live {
			continue
		}
		was := p.failed[uuid]
		switch {
		case err != nil && !was:
			p.log.Warn("node beat failed; FAILOVER skips it", "node", uuid, "err", err)
			p.failed[uuid] = true
		case err == nil && was:
			p.log.Info("node beat recovered", "node", uuid)
			delete(p.failed, uuid)
		}
	}
	p.mu.Unlock()
	p.rounds.Add(1)
}

// beat GETs the node's /healthz; any answer other than 2xx is a failure.
func (p *prober) beat(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+"/healthz", nil)
	if err != nil {
		return fmt.Errorf("beat %s: %w", addr, err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("beat %s: %w", addr, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("beat %s: status %s", addr, resp.Status)
	}
	return nil
}
