package sysinfo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/node/trust"
)

// DefaultAnswerTTL is the lease of an answer key.
const DefaultAnswerTTL = 5 * time.Minute

// Config configures a Responder.
type Config struct {
	// NodeUUID names the node's switch and get keys. Required.
	NodeUUID string
	// Keys builds the etcd keys; the zero value uses cluster.DefaultRoot.
	Keys cluster.Keys
	// Disks are paths (besides "/") whose file systems are reported, e.g.
	// the node's data directory.
	Disks []string
	// AnswerTTL is the lease TTL of each answer; default 5 minutes.
	AnswerTTL time.Duration
	// Logger receives the responder's logs; default discards.
	Logger *slog.Logger
	// Guard verifies each request (a signed cluster.SystemRequest); a
	// request that does not verify is refused and not answered. Required.
	Guard *trust.Guard
}

// Responder answers system-info requests for one node. Start it once;
// Stop is idempotent and waits.
type Responder struct {
	cfg  Config
	etcd *clientv3.Client
	log  *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewResponder checks cfg and builds a Responder.
func NewResponder(cfg Config, etcd *clientv3.Client) (*Responder, error) {
	if cfg.NodeUUID == "" {
		return nil, errors.New("sysinfo: NodeUUID is required")
	}
	if etcd == nil {
		return nil, errors.New("sysinfo: etcd client is nil")
	}
	if cfg.Guard == nil {
		return nil, errors.New("sysinfo: Guard is required")
	}
	if cfg.AnswerTTL == 0 {
		cfg.AnswerTTL = DefaultAnswerTTL
	}
	if cfg.AnswerTTL < time.Second {
		return nil, fmt.Errorf("sysinfo: AnswerTTL %s is below 1s", cfg.AnswerTTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Responder{cfg: cfg, etcd: etcd, log: cfg.Logger.With("component", "sysinfo")}, nil
}

// Start checks for a pending request and watches for new ones.
func (r *Responder) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return errors.New("sysinfo: already started")
	}
	key := r.cfg.Keys.SystemSwitch(r.cfg.NodeUUID)
	resp, err := r.etcd.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("sysinfo: read %s: %w", key, err)
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	r.done = make(chan struct{})
	var pending *mvccpb.KeyValue
	if len(resp.Kvs) > 0 {
		pending = resp.Kvs[0]
	}
	go r.loop(wctx, pending, resp.Header.Revision)
	return nil
}

// Stop ends the watch and waits for an answer being written.
func (r *Responder) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel = nil
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (r *Responder) loop(ctx context.Context, pending *mvccpb.KeyValue, rev int64) {
	defer close(r.done)
	key := r.cfg.Keys.SystemSwitch(r.cfg.NodeUUID)
	if pending != nil && r.verified(ctx, pending) {
		r.answer(ctx)
	}
	delay := 100 * time.Millisecond
	for ctx.Err() == nil {
		wch := r.etcd.Watch(clientv3.WithRequireLeader(ctx), key, clientv3.WithRev(rev+1))
		for wresp := range wch {
			if err := wresp.Err(); err != nil {
				r.log.Warn("sysinfo: switch watch broke", "error", err)
				break
			}
			delay = 100 * time.Millisecond
			rev = wresp.Header.Revision
			for _, ev := range wresp.Events {
				if ev.Type == clientv3.EventTypePut && r.verified(ctx, ev.Kv) {
					r.answer(ctx)
					break
				}
			}
		}
		if ctx.Err() != nil {
			return
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// verified reports whether a request verifies; a refused one is deleted,
// logged and reported by the Guard.
func (r *Responder) verified(ctx context.Context, kv *mvccpb.KeyValue) bool {
	_, _, err := r.cfg.Guard.Open(ctx, kv)
	switch {
	case err == nil:
		return true
	case trust.Refused(err):
		r.cfg.Guard.Refuse(ctx, kv, err)
	default:
		r.log.Warn("sysinfo: checking a request", "key", string(kv.Key), "error", err)
	}
	return false
}

// answer collects the system info and writes it under a fresh lease.
func (r *Responder) answer(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info := Collect(ctx, r.cfg.NodeUUID, r.cfg.Disks...)
	v, err := json.Marshal(info)
	if err != nil {
		r.log.Error("sysinfo: encode", "error", err)
		return
	}
	grant, err := r.etcd.Grant(ctx, int64(r.cfg.AnswerTTL/time.Second))
	if err != nil {
		r.log.Warn("sysinfo: grant answer lease", "error", err)
		return
	}
	key := r.cfg.Keys.SystemGet(r.cfg.NodeUUID)
	if _, err := r.etcd.Put(ctx, key, string(v), clientv3.WithLease(grant.ID)); err != nil {
		r.log.Warn("sysinfo: write answer", "key", key, "error", err)
		return
	}
	r.log.Debug("sysinfo: answered", "key", key)
}
