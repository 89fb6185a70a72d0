package pluginhost

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/pluginapi"
)

// DefaultPublishTTL is the TTL of a Publisher's lease when none is given.
const DefaultPublishTTL = 10 * time.Second

// Publisher publishes a node's handler descriptions (name, version,
// description, params schema) at cluster.Keys.Handler(name, node) in etcd
// so servers can list handlers and validate job params. The keys live under
// the Publisher's own lease: they vanish when the node stops (Stop revokes
// it) or dies (the lease expires). When the lease is lost while running
// (etcd unreachable for longer than the TTL) the Publisher grants a new one
// and publishes again.
type Publisher struct {
	etcd   *clientv3.Client
	keys   cluster.Keys
	node   string
	ttl    time.Duration
	infos  func() []pluginapi.Info
	logger *slog.Logger

	mu      sync.Mutex
	lease   clientv3.LeaseID
	cancel  context.CancelFunc
	started bool
	wg      sync.WaitGroup
	stop    sync.Once
}

// NewPublisher returns a Publisher of the handlers infos returns (normally
// Host.Infos) for node nodeUUID; ttl 0 means DefaultPublishTTL.
func NewPublisher(etcd *clientv3.Client, keys cluster.Keys, nodeUUID string, ttl time.Duration,
	infos func() []pluginapi.Info, logger *slog.Logger) *Publisher {
	if ttl <= 0 {
		ttl = DefaultPublishTTL
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Publisher{etcd: etcd, keys: keys, node: nodeUUID, ttl: ttl, infos: infos,
		logger: logger.With("component", "handler_publisher")}
}

// Start publishes the handlers once (failing if etcd does not take them)
// and keeps them published until Stop.
func (p *Publisher) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started {
		return errors.New("pluginhost: Publisher started twice")
	}
	p.started = true
	lease, err := p.publish(ctx)
	if err != nil {
		return err
	}
	p.lease = lease
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p.cancel = cancel
	p.wg.Add(1)
	go p.keep(runCtx, lease)
	return nil
}

// publish grants a lease and puts every handler's description under it in
// one transaction. When anything after the grant fails it revokes the new
// lease, so no key it may have written outlives the failure: a Stop that
// cancels ctx while the transaction is in flight can make the client report
// an error for a transaction the server committed, and those keys would
// otherwise stay until the lease expired, under a lease no one revokes.
func (p *Publisher) publish(ctx context.Context) (_ clientv3.LeaseID, err error) {
	grant, err := p.etcd.Grant(ctx, int64(p.ttl/time.Second))
	if err != nil {
		return 0, fmt.Errorf("pluginhost: granting the handler lease: %w", err)
	}
	defer func() {
		if err != nil {
			p.revoke(context.WithoutCancel(ctx), grant.ID)
		}
	}()
	infos := p.infos()
	ops := make([]clientv3.Op, 0, len(infos))
	for _, info := range infos {
		v, err := json.Marshal(cluster.HandlerInfo{Name: info.Name, Version: info.Version,
			Description: info.Description, ParamsSchema: info.ParamsSchema, Node: p.node})
		if err != nil {
			return 0, fmt.Errorf("pluginhost: encoding handler %q: %w", info.Name, err)
		}
		ops = append(ops, clientv3.OpPut(p.keys.Handler(info.Name, p.node), string(v), clientv3.WithLease(grant.ID)))
	}
	if len(ops) > 0 {
		if _, err := p.etcd.Txn(ctx).Then(ops...).Commit(); err != nil {
			return 0, fmt.Errorf("pluginhost: publishing handlers: %w", err)
		}
	}
	p.logger.Debug("handlers published", "count", len(ops), "lease", int64(grant.ID))
	return grant.ID, nil
}

// keep keeps lease alive; when it is lost it publishes under a new one.
func (p *Publisher) keep(ctx context.Context, lease clientv3.LeaseID) {
	defer p.wg.Done()
	backoff := time.Second
	for {
		if ch, err := p.etcd.KeepAlive(ctx, lease); err == nil {
			for range ch { //nolint:revive // drain: the channel closes when the lease is lost or ctx ends
			}
		}
		for {
			if ctx.Err() != nil {
				return
			}
			p.logger.Warn("handler lease lost; publishing the handlers again", "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			next, err := p.publish(ctx)
			if err == nil {
				p.mu.Lock()
				p.lease = next
				p.mu.Unlock()
				lease, backoff = next, time.Second
				break
			}
			p.logger.Error("publishing handlers failed", "err", err)
			backoff = min(2*backoff, 30*time.Second)
		}
	}
}

// Stop stops keeping the handlers published and revokes the lease, which
// removes them. Idempotent.
func (p *Publisher) Stop() {
	p.stop.Do(func() {
		p.mu.Lock()
		cancel := p.cancel
		p.mu.Unlock()
		if cancel == nil {
			return
		}
		cancel()
		p.wg.Wait()
		p.mu.Lock()
		lease := p.lease
		p.mu.Unlock()
		p.revoke(context.Background(), lease)
	})
}

// revoke revokes lease, which deletes the keys put under it, giving etcd up
// to two seconds; on failure the keys vanish when the lease expires.
func (p *Publisher) revoke(ctx context.Context, lease clientv3.LeaseID) {
	ctx, done := context.WithTimeout(ctx, 2*time.Second)
	defer done()
	if _, err := p.etcd.Revoke(ctx, lease); err != nil {
		p.logger.Warn("revoking the handler lease failed; the handlers vanish when it expires",
			"lease", int64(lease), "err", err)
	}
}
