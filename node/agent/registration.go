package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/internal/waitctx"
)

// registration keeps /Cronix/node/<uuid> alive under a lease. When the
// lease is lost (revoked, or expired during an etcd outage) it grants a new
// one and registers again.
type registration struct {
	etcd *clientv3.Client
	key  string
	ttl  time.Duration
	log  *slog.Logger

	mu    sync.Mutex
	info  cluster.NodeInfo
	lease clientv3.LeaseID

	cancel context.CancelFunc
	done   chan struct{}
}

func newRegistration(etcd *clientv3.Client, key string, ttl time.Duration, info cluster.NodeInfo, logger *slog.Logger) *registration {
	return &registration{etcd: etcd, key: key, ttl: ttl, info: info, log: logger}
}

// start registers once (so a broken etcd fails Start) and then keeps the
// registration alive in the background.
func (r *registration) start(ctx context.Context) error {
	if err := r.register(ctx); err != nil {
		return err
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	r.done = make(chan struct{})
	go r.keepAlive(kctx)
	return nil
}

// register grants a lease and puts the node info under it.
func (r *registration) register(ctx context.Context) error {
	ttl := int64((r.ttl + time.Second - 1) / time.Second)
	grant, err := r.etcd.Grant(ctx, ttl)
	if err != nil {
		return fmt.Errorf("agent: grant registration lease: %w", err)
	}
	r.mu.Lock()
	r.lease = grant.ID
	r.mu.Unlock()
	if err := r.put(ctx); err != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_, _ = r.etcd.Revoke(ctx, grant.ID)
		return err
	}
	return nil
}

// put writes the current node info under the current lease.
func (r *registration) put(ctx context.Context) error {
	r.mu.Lock()
	info, lease := r.info, r.lease
	r.mu.Unlock()
	b, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("agent: encode node info: %w", err)
	}
	if _, err := r.etcd.Put(ctx, r.key, string(b), clientv3.WithLease(lease)); err != nil {
		return fmt.Errorf("agent: register node at %s: %w", r.key, err)
	}
	return nil
}

// setStatus changes the advertised status and rewrites the registration.
func (r *registration) setStatus(ctx context.Context, status string) error {
	r.mu.Lock()
	r.info.Status = status
	r.mu.Unlock()
	return r.put(ctx)
}

// setPluginStatus changes the advertised plugin status and rewrites the
// registration.
func (r *registration) setPluginStatus(ctx context.Context, st []cluster.PluginStatus) error {
	r.mu.Lock()
	r.info.PluginStatus = st
	r.mu.Unlock()
	return r.put(ctx)
}

func (r *registration) keepAlive(ctx context.Context) {
	defer close(r.done)
	var bo backoff
	for {
		r.mu.Lock()
		lease := r.lease
		r.mu.Unlock()
		ch, err := r.etcd.KeepAlive(ctx, lease)
		if err == nil {
			// Drain keepalive responses; the channel closes when the lease
			// is lost or ctx ends.
			for range ch {
			}
		}
		if ctx.Err() != nil {
			return
		}
		r.log.Warn("agent: registration lease lost; registering again", "lease", int64(lease), "error", err)
		for {
			if !waitctx.Sleep(ctx, bo.next()) {
				return
			}
			if err := r.register(ctx); err != nil {
				r.log.Warn("agent: registering again", "error", err)
				continue
			}
			r.log.Info("agent: registered again", "key", r.key)
			bo.reset()
			break
		}
	}
}

// stop ends the keepalive, deletes the registration and revokes the lease.
func (r *registration) stop(ctx context.Context) {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	r.mu.Lock()
	lease := r.lease
	r.mu.Unlock()
	// Delete only our own registration, not one a newer process made.
	if _, err := r.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(r.key), "=", lease)).
		Then(clientv3.OpDelete(r.key)).Commit(); err != nil {
		r.log.Warn("agent: deleting registration", "key", r.key, "error", err)
	}
	if _, err := r.etcd.Revoke(ctx, lease); err != nil {
		r.log.Warn("agent: revoking registration lease", "lease", int64(lease), "error", err)
	}
}

// leaseID is the current registration lease; proc keys live under it.
func (r *registration) leaseID() clientv3.LeaseID {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lease
}
