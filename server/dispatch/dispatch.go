// Package dispatch writes the trigger leader's output to etcd: fired runs
// (/Cronix/run/<node>/<fire_id>) and job placements (/Cronix/job/<node>/<job>),
// in as few transactions as the per-transaction limits allow, each fenced on
// the leader key (/Cronix/leader) holding "<term>/<server_id>". A leader
// claims the fence for its raft term with Claim; once another server has
// claimed a higher term, every write of the old leader fails with ErrFenced
// and writes nothing.
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
)

// ErrFenced means the leader key holds another server's equal or higher
// term: this server is no longer the trigger leader and must stop.
var ErrFenced = errors.New("dispatch: fenced: another server holds the leader key")

// Defaults of the per-transaction limits.
const (
	// DefaultMaxOps is etcd's default --max-txn-ops.
	DefaultMaxOps = 128
	// DefaultMaxBytes keeps a transaction under etcd's default 1.5 MiB request limit.
	DefaultMaxBytes = 1 << 20
)

// DispatchItem is one fire for one node.
type DispatchItem struct {
	// Node is the target node uuid.
	Node string
	// Dispatch is the record written to the node's run key.
	Dispatch cluster.Dispatch
}

// Placement is one job config published to one node.
type Placement struct {
	// Node is the node uuid.
	Node string
	// Job is the config the node needs to run the job.
	Job cluster.JobConfig
}

// JobRef names a job placed on a node.
type JobRef struct {
	Node  string
	JobID int64
}

// PartialError is returned when a batch failed after some of its leading
// items were committed: the first Committed items (in the order given) are
// in etcd, the rest are not. It wraps the cause (maybe ErrFenced).
type PartialError struct {
	Committed int
	Err       error
}

func (e *PartialError) Error() string {
	return fmt.Sprintf("%v (first %d items committed)", e.Err, e.Committed)
}

func (e *PartialError) Unwrap() error { return e.Err }

// Committed is how many leading items of a failed batch are in etcd: the
// count of a *PartialError in err's chain, else 0.
func Committed(err error) int {
	var pe *PartialError
	if errors.As(err, &pe) {
		return pe.Committed
	}
	return 0
}

// Option configures a Dispatcher.
type Option func(*Dispatcher)

// WithMaxOps sets the largest number of operations in one transaction; it
// must not exceed the server's --max-txn-ops (etcd default 128; Cronix's
// embedded etcd allows 8192).
func WithMaxOps(n int) Option {
	return func(d *Dispatcher) {
		if n > 0 {
			d.maxOps = n
		}
	}
}

// WithMaxBytes sets the largest payload (keys and values) of one transaction.
func WithMaxBytes(n int) Option {
	return func(d *Dispatcher) {
		if n > 0 {
			d.maxBytes = n
		}
	}
}

// WithTxnHook calls fn after every committed write transaction with its
// number of operations (for metrics and tests).
func WithTxnHook(fn func(ops int)) Option {
	return func(d *Dispatcher) { d.hook = fn }
}

// Dispatcher writes fenced batches for one server.
type Dispatcher struct {
	cli      *clientv3.Client
	keys     cluster.Keys
	ring     *cluster.Keyring
	serverID string
	maxOps   int
	maxBytes int
	hook     func(ops int)
}

// New returns a Dispatcher writing as serverID, signing every record with
// ring's current cluster key (see cluster.Keyring.Seal).
func New(cli *clientv3.Client, keys cluster.Keys, serverID string, ring *cluster.Keyring, opts ...Option) *Dispatcher {
	d := &Dispatcher{cli: cli, keys: keys, serverID: serverID, ring: ring, maxOps: DefaultMaxOps, maxBytes: DefaultMaxBytes}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Claim makes this server the fence holder for term: the leader key is
// written if it is absent or holds a lower term. Claiming the same term
// again is a no-op. If the key holds an equal or higher term of another
// server (or a higher term of this one), Claim returns ErrFenced.
func (d *Dispatcher) Claim(ctx context.Context, term uint64) error {
	key := d.keys.Leader()
	val := cluster.LeaderValue(term, d.serverID)
	// Every value of a term below ours sorts before "<term>/" (the term is
	// zero-padded); any value of our term or a higher one does not.
	below := cluster.LeaderValue(term, "")
	resp, err := d.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, val)).
		Else(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(key), "<", below)},
			[]clientv3.Op{clientv3.OpPut(key, val)},
			[]clientv3.Op{clientv3.OpGet(key)},
		)).Commit()
	if err != nil {
		return fmt.Errorf("dispatch: claim leader key for term %d: %w", term, err)
	}
	if resp.Succeeded {
		return nil
	}
	inner := resp.Responses[0].GetResponseTxn()
	if inner.Succeeded {
		return nil
	}
	var cur string
	if kvs := inner.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		cur = string(kvs[0].Value)
	}
	if cur == val {
		return nil
	}
	return fmt.Errorf("%w: leader key is %q, claim was %q", ErrFenced, cur, val)
}

// Leader reads the leader key: the term and server id of the fence holder,
// ok=false when nobody claimed it yet.
func (d *Dispatcher) Leader(ctx context.Context) (term uint64, serverID string, ok bool, err error) {
	resp, err := d.cli.Get(ctx, d.keys.Leader())
	if err != nil {
		return 0, "", false, fmt.Errorf("dispatch: read leader key: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, "", false, nil
	}
	term, serverID, err = cluster.ParseLeaderValue(string(resp.Kvs[0].Value))
	if err != nil {
		return 0, "", false, err
	}
	return term, serverID, true, nil
}

// Dispatch puts every item's run key, signed under term, in as few fenced transactions as the
// limits allow. If the fence fails it returns ErrFenced (wrapped) and writes
// nothing more; on any failure the error is a *PartialError telling how many
// leading items were committed.
func (d *Dispatcher) Dispatch(ctx context.Context, term uint64, items []DispatchItem) error {
	ops := make([]op, 0, len(items))
	for _, it := range items {
		key := d.keys.Run(it.Node, it.Dispatch.FireID)
		b, err := d.ring.SealJSON(key, term, it.Dispatch)
		if err != nil {
			return fmt.Errorf("dispatch: sign fire %s: %w", it.Dispatch.FireID, err)
		}
		ops = append(ops, op{key: key, val: string(b), put: true})
	}
	if err := d.write(ctx, term, ops); err != nil {
		return fmt.Errorf("dispatch %d fires: %w", len(items), err)
	}
	return nil
}

// PlaceJob publishes job configs to their nodes, batched and fenced like Dispatch.
func (d *Dispatcher) PlaceJob(ctx context.Context, term uint64, ps ...Placement) error {
	ops := make([]op, 0, len(ps))
	for _, p := range ps {
		key := d.keys.Job(p.Node, p.Job.JobID)
		b, err := d.ring.SealJSON(key, term, p.Job)
		if err != nil {
			return fmt.Errorf("dispatch: sign job %d: %w", p.Job.JobID, err)
		}
		ops = append(ops, op{key: key, val: string(b), put: true})
	}
	if err := d.write(ctx, term, ops); err != nil {
		return fmt.Errorf("place %d jobs: %w", len(ps), err)
	}
	return nil
}

// UnplaceJob removes job configs from nodes, batched and fenced like Dispatch.
func (d *Dispatcher) UnplaceJob(ctx context.Context, term uint64, refs ...JobRef) error {
	ops := make([]op, 0, len(refs))
	for _, r := range refs {
		ops = append(ops, op{key: d.keys.Job(r.Node, r.JobID)})
	}
	if err := d.write(ctx, term, ops); err != nil {
		return fmt.Errorf("unplace %d jobs: %w", len(refs), err)
	}
	return nil
}

// CancelItem is a fire dispatched ahead to drop before it starts.
type CancelItem struct {
	// Node and FireID name the run key.
	Node, FireID string
	// Reason is the message the fire is reported skipped with.
	Reason string
}

// cancelTTL is the lease of cancel requests: a node that never acts on one
// (it is gone) does not leave it behind for long.
const cancelTTL = 60 // seconds

// Cancel puts a signed cancel request (cluster.KillRequest with Cancel set)
// at /Cronix/kill/<node>/<fire> for each item, under one lease of
// cancelTTL, batched and fenced like Dispatch: the node drops the fire if
// it has not started it yet and reports it skipped.
func (d *Dispatcher) Cancel(ctx context.Context, term uint64, now time.Time, items []CancelItem) error {
	if len(items) == 0 {
		return nil
	}
	lease, err := d.cli.Grant(ctx, cancelTTL)
	if err != nil {
		return fmt.Errorf("dispatch: grant cancel lease: %w", err)
	}
	ops := make([]op, 0, len(items))
	for _, it := range items {
		key := d.keys.Kill(it.Node, it.FireID)
		req := cluster.KillRequest{FireID: it.FireID, RequestedAt: now.UTC(), RequestedBy: "scheduler", Cancel: it.Reason}
		b, err := d.ring.SealJSON(key, term, req)
		if err != nil {
			return fmt.Errorf("dispatch: sign cancel of fire %s: %w", it.FireID, err)
		}
		ops = append(ops, op{key: key, val: string(b), put: true, lease: lease.ID})
	}
	if err := d.write(ctx, term, ops); err != nil {
		return fmt.Errorf("cancel %d fires: %w", len(items), err)
	}
	return nil
}

type op struct {
	key, val string
	put      bool
	lease    clientv3.LeaseID // 0: none
}

// opOverhead approximates the protobuf framing of one operation.
const opOverhead = 16

// write commits ops in chunks bounded by maxOps and maxBytes, each guarded
// by the leader key holding exactly this server's value for term.
func (d *Dispatcher) write(ctx context.Context, term uint64, ops []op) error {
	fence := clientv3.Compare(clientv3.Value(d.keys.Leader()), "=", cluster.LeaderValue(term, d.serverID))
	committed := 0
	for committed < len(ops) {
		n, size := 0, 0
		for committed+n < len(ops) && n < d.maxOps {
			o := ops[committed+n]
			s := len(o.key) + len(o.val) + opOverhead
			if n > 0 && size+s > d.maxBytes {
				break
			}
			size += s
			n++
		}
		chunk := make([]clientv3.Op, n)
		for i, o := range ops[committed : committed+n] {
			switch {
			case o.put && o.lease != 0:
				chunk[i] = clientv3.OpPut(o.key, o.val, clientv3.WithLease(o.lease))
			case o.put:
				chunk[i] = clientv3.OpPut(o.key, o.val)
			default:
				chunk[i] = clientv3.OpDelete(o.key)
			}
		}
		resp, err := d.cli.Txn(ctx).If(fence).Then(chunk...).Commit()
		if err != nil {
			return &PartialError{Committed: committed, Err: fmt.Errorf("etcd txn: %w", err)}
		}
		if !resp.Succeeded {
			return &PartialError{Committed: committed,
				Err: fmt.Errorf("%w: term %d of %s is no longer the leader key", ErrFenced, term, d.serverID)}
		}
		if d.hook != nil {
			d.hook(n)
		}
		committed += n
	}
	return nil
}

// SignedPut writes one record a node acts on outside the trigger loop (a
// kill request, a proc key marked killed, a system-info request), signed
// under the term the leader key holds, in one transaction that also
// requires the leader key unchanged (and every cmp in extra), so the
// signed term is the one in force when the record is written. With no
// leader key yet the term is 0. rev is the revision of the write; ok is
// false when a cmp of extra failed; a leader change between the read and
// the write is retried.
func SignedPut(ctx context.Context, cli *clientv3.Client, keys cluster.Keys, ring *cluster.Keyring,
	key string, record any, extra []clientv3.Cmp, opts ...clientv3.OpOption) (rev int64, ok bool, err error) {
	if ring == nil {
		return 0, false, fmt.Errorf("dispatch: write %s: no cluster key (node token) configured", key)
	}
	body, err := json.Marshal(record)
	if err != nil {
		return 0, false, fmt.Errorf("dispatch: encode record for %s: %w", key, err)
	}
	for range 5 {
		resp, err := cli.Get(ctx, keys.Leader())
		if err != nil {
			return 0, false, fmt.Errorf("dispatch: read leader key: %w", err)
		}
		var (
			term  uint64
			fence clientv3.Cmp
		)
		if len(resp.Kvs) == 0 {
			fence = clientv3.Compare(clientv3.CreateRevision(keys.Leader()), "=", 0)
		} else {
			if term, _, err = cluster.ParseLeaderValue(string(resp.Kvs[0].Value)); err != nil {
				return 0, false, fmt.Errorf("dispatch: %w", err)
			}
			fence = clientv3.Compare(clientv3.ModRevision(keys.Leader()), "=", resp.Kvs[0].ModRevision)
		}
		val, err := ring.Seal(key, term, body)
		if err != nil {
			return 0, false, fmt.Errorf("dispatch: sign %s: %w", key, err)
		}
		tr, err := cli.Txn(ctx).If(append([]clientv3.Cmp{fence}, extra...)...).
			Then(clientv3.OpPut(key, string(val), opts...)).
			Else(clientv3.OpGet(keys.Leader())).Commit()
		if err != nil {
			return 0, false, fmt.Errorf("dispatch: write %s: %w", key, err)
		}
		if tr.Succeeded {
			return tr.Header.Revision, true, nil
		}
		kvs := tr.Responses[0].GetResponseRange().Kvs
		stillSame := (len(resp.Kvs) == 0 && len(kvs) == 0) ||
			(len(resp.Kvs) > 0 && len(kvs) > 0 && kvs[0].ModRevision == resp.Kvs[0].ModRevision)
		if stillSame {
			return 0, false, nil // an extra cmp failed
		}
	}
	return 0, false, fmt.Errorf("dispatch: write %s: the leader key kept changing", key)
}
