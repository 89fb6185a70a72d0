package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// stockMaxTxnOps is etcd's default --max-txn-ops.
const stockMaxTxnOps = 128

// txnLimit is the most operations the agent puts in one etcd txn, shared
// by its batched writers (run-key deletions, proc keys): MaxTxnOps until
// etcd refuses a txn as too large, then etcd's stock limit for all of them.
type txnLimit struct {
	n   atomic.Int64
	log *slog.Logger
}

func newTxnLimit(n int, log *slog.Logger) *txnLimit {
	l := &txnLimit{log: log}
	l.n.Store(int64(n))
	return l
}

func (l *txnLimit) get() int { return int(l.n.Load()) }

// commit applies ops in order, in txns of at most the limit, and calls
// applied(from, n) after each txn that applied ops[from:from+n]. A txn
// etcd refuses as too large is retried at the stock limit. It returns how
// many ops were applied: all of them, or those before the txn that failed.
func (l *txnLimit) commit(ctx context.Context, etcd *clientv3.Client, ops []clientv3.Op, applied func(from, n int)) (int, error) {
	from := 0
	for from < len(ops) {
		limit := l.get()
		n := min(len(ops)-from, limit)
		if _, err := etcd.Txn(ctx).Then(ops[from : from+n]...).Commit(); err != nil {
			if errors.Is(err, rpctypes.ErrTooManyOps) && limit > stockMaxTxnOps {
				if l.n.CompareAndSwap(int64(limit), stockMaxTxnOps) {
					l.log.Warn("agent: etcd refused a large txn; writing in txns of 128", "ops", n)
				}
				continue
			}
			return from, fmt.Errorf("txn of %d operations: %w", n, err)
		}
		if applied != nil {
			applied(from, n)
		}
		from += n
	}
	return from, nil
}
