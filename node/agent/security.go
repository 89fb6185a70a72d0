package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/internal/waitctx"
	"github.com/cronix/cronix/node/trust"
)

// SecurityEventsPath is the servers' endpoint for security events.
const SecurityEventsPath = "/api/v1/internal/security-events"

// maxSecurityEvents bounds the events waiting for a server; beyond it the
// oldest are dropped (and counted in the log).
const maxSecurityEvents = 1000

// securitySender delivers the records this node refused to the servers,
// which store them as security events. Delivery is best effort: events
// wait in memory (bounded) and are retried with backoff until a server
// answers 200; they are always logged by the Guard first.
type securitySender struct {
	a      *Agent
	mu     sync.Mutex
	events []cluster.SecurityEvent
	notify chan struct{}
	bg     background
}

func newSecuritySender(a *Agent) *securitySender {
	return &securitySender{a: a, notify: make(chan struct{}, 1)}
}

// report queues one event; it never blocks.
func (s *securitySender) report(ev trust.Event) {
	s.mu.Lock()
	if len(s.events) >= maxSecurityEvents {
		s.a.log.Warn("agent: too many undelivered security events; dropping the oldest", "key", s.events[0].Key)
		s.events = s.events[1:]
	}
	s.events = append(s.events, ev)
	s.mu.Unlock()
	signal(s.notify)
}

func (s *securitySender) start(ctx context.Context) { s.bg.start(ctx, s.loop) }

// stop ends the loop after one last delivery attempt bounded by ctx.
func (s *securitySender) stop(ctx context.Context) {
	if s.bg.stop() {
		_ = s.flush(ctx)
	}
}

func (s *securitySender) loop(ctx context.Context) {
	var bo backoff
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.notify:
		}
		for !s.flush(ctx) {
			if !waitctx.Sleep(ctx, bo.next()) {
				return
			}
		}
		bo.reset()
	}
}

// flush posts the queued events to the first server that takes them; it
// reports whether nothing is left.
func (s *securitySender) flush(ctx context.Context) bool {
	s.mu.Lock()
	batch := append([]cluster.SecurityEvent(nil), s.events...)
	s.mu.Unlock()
	if len(batch) == 0 {
		return true
	}
	body, err := json.Marshal(cluster.SecurityEventBatch{Node: s.a.cfg.UUID, Events: batch})
	if err != nil {
		s.a.log.Error("agent: encode security events", "error", err)
		return true
	}
	for _, base := range s.a.servers.URLs() {
		if err := s.post(ctx, base, body); err != nil {
			s.a.log.Warn("agent: reporting security events", "server", base, "error", err)
			continue
		}
		s.mu.Lock()
		s.events = s.events[min(len(batch), len(s.events)):]
		s.mu.Unlock()
		return true
	}
	return false
}

func (s *securitySender) post(ctx context.Context, base string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+SecurityEventsPath, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.a.cfg.NodeToken)
	resp, err := s.a.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("post security events: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("post security events to %s: %s: %s", base, resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}
