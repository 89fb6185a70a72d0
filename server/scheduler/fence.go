package scheduler

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/dispatch"
)

// syncLeader names the leader key watch for resync.
const syncLeader = "leader"

// watchLeader checks that the leader key still holds this term's claim and
// watches it, so the loop stops as soon as a newer term claims the fence,
// not only at its next write (a loop with nothing due writes nothing).
func (l *loop) watchLeader(ctx context.Context) error {
	l.leaderW.close()
	key := l.cfg.Keys.Leader()
	resp, err := l.cfg.Etcd.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("read leader key: %w", err)
	}
	var cur string
	if len(resp.Kvs) > 0 {
		cur = string(resp.Kvs[0].Value)
	}
	if err := l.ownsFence(cur); err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	l.leaderW.ch = l.cfg.Etcd.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1))
	l.leaderW.cancel = cancel
	return nil
}

// ownsFence returns ErrFenced unless the leader key value is this term's
// claim. The scheduler does not know its server id: the term is enough,
// a term is claimed by one server only.
func (l *loop) ownsFence(val string) error {
	term, _, err := cluster.ParseLeaderValue(val)
	if val == "" || err != nil || term != l.term {
		return errorf("term %d: %w: leader key is %q", l.term, dispatch.ErrFenced, val)
	}
	return nil
}

// isFenced reports whether err says a newer term holds the fence.
func isFenced(err error) bool { return errors.Is(err, dispatch.ErrFenced) }

// onLeader handles a change of the leader key: any value but this term's
// claim (or its deletion) ends the loop with ErrFenced.
func (l *loop) onLeader(ctx context.Context, wr clientv3.WatchResponse, ok bool) error {
	if ctx.Err() != nil {
		return nil //nolint:nilerr // leadership ended: not an error of the loop
	}
	if watchBroken(wr, ok) {
		err := l.watchLeader(ctx)
		if err != nil && !isFenced(err) {
			l.resyncLater(ctx, syncLeader, &l.leaderW, err)
			return nil
		}
		return err
	}
	for _, ev := range wr.Events {
		var val string
		if ev.Type == clientv3.EventTypePut {
			val = string(ev.Kv.Value)
		}
		if err := l.ownsFence(val); err != nil {
			return err
		}
	}
	return nil
}
