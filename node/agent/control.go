package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/internal/waitctx"
)

// killByRequest is the message of a fire killed through the API.
const killByRequest = "killed by request"

// watchControlKeys watches this node's proc keys (a replica sets Killed to kill a
// long run) and kill keys (a kill of a fire that has no proc key yet). It
// lists the kill keys first, so a request made while the agent was not
// watching is not missed.
func (a *Agent) watchControlKeys(ctx context.Context) {
	procPrefix := a.cfg.Keys.ProcPrefix(a.cfg.UUID)
	killPrefix := a.cfg.Keys.KillPrefix(a.cfg.UUID)
	var bo backoff
	for ctx.Err() == nil {
		resp, err := a.etcd.Get(ctx, killPrefix, clientv3.WithPrefix())
		if err != nil {
			if ctx.Err() == nil {
				a.log.Warn("agent: listing kill requests", "error", err)
				waitctx.Sleep(ctx, bo.next())
			}
			continue
		}
		for _, kv := range resp.Kvs {
			a.onKillKey(ctx, kv)
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		rev := clientv3.WithRev(resp.Header.Revision + 1)
		kch := a.etcd.Watch(wctx, killPrefix, clientv3.WithPrefix(), rev)
		pch := a.etcd.Watch(wctx, procPrefix, clientv3.WithPrefix(), rev)
		a.watchControl(ctx, kch, pch, &bo)
		cancel()
		if ctx.Err() == nil {
			waitctx.Sleep(ctx, bo.next())
		}
	}
}

// watchControl handles control events until a watch breaks or ctx ends.
func (a *Agent) watchControl(ctx context.Context, kch, pch clientv3.WatchChan, bo *backoff) {
	for {
		var (
			wresp clientv3.WatchResponse
			ok    bool
			proc  bool
		)
		select {
		case <-ctx.Done():
			return
		case wresp, ok = <-kch:
		case wresp, ok = <-pch:
			proc = true
		}
		if !ok {
			return
		}
		if err := wresp.Err(); err != nil {
			a.log.Warn("agent: control watch broke; listing again", "error", err)
			return
		}
		bo.reset()
		for _, ev := range wresp.Events {
			if ev.Type != clientv3.EventTypePut {
				continue
			}
			if proc {
				a.onProcKey(ctx, ev.Kv)
			} else {
				a.onKillKey(ctx, ev.Kv)
			}
		}
	}
}

// onProcKey kills the run of a proc key a replica marked Killed. The node
// writes its proc keys as plain ProcInfo; a replica marks one killed by
// writing it back signed, so a plain value saying Killed, or a signed one
// that does not verify, is refused.
func (a *Agent) onProcKey(ctx context.Context, kv *mvccpb.KeyValue) {
	var info cluster.ProcInfo
	if _, err := cluster.DecodeSignedRecord(kv.Value); err != nil {
		// Plain: the node's own write, or a forgery.
		if err := json.Unmarshal(kv.Value, &info); err != nil {
			a.guard.Refuse(ctx, kv, fmt.Errorf("%w: unreadable proc key: %w", cluster.ErrUnsigned, err))
			return
		}
		if info.Killed {
			a.guard.Refuse(ctx, kv, fmt.Errorf("%w: proc key marked killed without a signature", cluster.ErrUnsigned))
		}
		return
	}
	body, _, ok := a.open(ctx, kv)
	if !ok {
		return
	}
	if err := json.Unmarshal(body, &info); err != nil {
		a.log.Warn("agent: unreadable signed proc key", "key", string(kv.Key), "error", err)
		return
	}
	if !info.Killed {
		return
	}
	a.log.Info("agent: kill requested through proc key", "fire_id", info.FireID, "key", string(kv.Key))
	if !a.kill(info.FireID, killByRequest, false) {
		// Not ours any more (ended, or left by an earlier process): drop it.
		if _, err := a.etcd.Delete(ctx, string(kv.Key)); err != nil && ctx.Err() == nil {
			a.log.Warn("agent: deleting stale proc key", "key", string(kv.Key), "error", err)
		}
	}
}

// onKillKey kills (or remembers to kill) the fire a signed kill key names,
// then deletes the key. A kill key that does not verify is refused.
func (a *Agent) onKillKey(ctx context.Context, kv *mvccpb.KeyValue) {
	fireID := cluster.LastSegment(string(kv.Key))
	body, _, ok := a.open(ctx, kv)
	if !ok {
		return
	}
	var req cluster.KillRequest
	if err := json.Unmarshal(body, &req); err != nil || (req.FireID != "" && req.FireID != fireID) {
		a.guard.Refuse(ctx, kv, fmt.Errorf("%w: kill request does not name its key's fire", cluster.ErrBadSignature))
		return
	}
	if req.Cancel != "" {
		a.log.Info("agent: cancel of an unstarted fire requested", "fire_id", fireID, "by", req.RequestedBy,
			"kept", a.cancelUnstarted(fireID, req.Cancel))
	} else {
		a.log.Info("agent: kill requested", "fire_id", fireID, "by", req.RequestedBy)
		a.kill(fireID, killByRequest, true)
	}
	if _, err := a.etcd.Delete(ctx, string(kv.Key)); err != nil && ctx.Err() == nil {
		a.log.Warn("agent: deleting kill request", "key", string(kv.Key), "error", err)
	}
}
