// Package trust is a node's check of the records it acts on. Every record
// the trigger leader or a server replica writes for a node (run dispatch,
// kill request, proc key marked killed, system-info request) is a
// cluster.SignedRecord. Before acting on one, the node's Guard verifies:
//
//  1. the MAC, with the current or the previous cluster key, over the
//     record's etcd key, its term and its body: an unsigned record, one
//     signed with another key, or a valid record copied under another key
//     (another fire id, another node) is refused;
//  2. the term against the leader key (/Cronix/leader), which only ever
//     moves to a higher term and which every leader write is fenced on: a
//     record written (etcd mod revision) after the current term claimed the
//     key must carry that term, and one written before must carry an older
//     term. A valid record of an older term written again later (a replay
//     of a captured value) is refused, while records an old leader wrote
//     before it was deposed still run.
//
// A refused record is not acted on: the Guard deletes its key (only if it
// still holds the refused value), logs it and reports a security Event.
//
// Not covered: a replay of a record under its own key, in the same term,
// after the node deleted it (the node's recent-fire set drops those it
// ran; a restarted node does not remember them). Whoever holds the node
// token holds the cluster key.
package trust

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
)

// ErrStaleTerm: a correctly signed record whose term does not fit the
// leader key at the revision it was written (a replayed or stale record).
var ErrStaleTerm = errors.New("record term does not match the leader key")

// Event kinds reported for refused records.
const (
	KindUnsigned     = "unsigned_record"
	KindBadSignature = "bad_signature"
	KindStaleTerm    = "stale_term"
	KindMalformed    = "malformed_record"
)

// Event is a security event: a record this node refused.
type Event = cluster.SecurityEvent

// Config configures a Guard.
type Config struct {
	// Etcd reads the leader key and deletes refused records. Required.
	Etcd *clientv3.Client
	// Keys builds the leader key.
	Keys cluster.Keys
	// Keyring verifies records. Required.
	Keyring *cluster.Keyring
	// Logger receives one error line per refused record; default discards.
	Logger *slog.Logger
	// Report, when set, receives every refused record's Event (it must not
	// block for long).
	Report func(Event)
}

// Guard verifies records for one node. It is safe for concurrent use.
type Guard struct {
	cfg Config
	log *slog.Logger

	mu    sync.Mutex
	fence fenceView
	// reading is closed when the leader key read in progress ends; nil
	// when none is.
	reading chan struct{}
}

// fenceView is the leader key as read at revision readRev.
type fenceView struct {
	read    bool
	readRev int64  // header revision of the read
	exists  bool   // the leader key existed then
	term    uint64 // its term
	rev     int64  // its mod revision (when that term claimed it)
}

// New checks cfg and returns a Guard.
func New(cfg Config) (*Guard, error) {
	if cfg.Etcd == nil {
		return nil, errors.New("trust: etcd client is nil")
	}
	if cfg.Keyring == nil {
		return nil, errors.New("trust: keyring is nil")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Guard{cfg: cfg, log: cfg.Logger}, nil
}

// Open verifies kv (MAC and term) and returns the record's body. Any error
// means "do not act on it"; errors wrap cluster.ErrUnsigned,
// cluster.ErrBadSignature or ErrStaleTerm for refused records, anything
// else is a failure to read the leader key (retry later).
func (g *Guard) Open(ctx context.Context, kv *mvccpb.KeyValue) ([]byte, uint64, error) {
	body, term, err := g.cfg.Keyring.Open(string(kv.Key), kv.Value)
	if err != nil {
		return nil, 0, err
	}
	if err := g.checkTerm(ctx, term, kv.ModRevision); err != nil {
		return nil, 0, err
	}
	return body, term, nil
}

// checkTerm judges a record of term written at etcd revision modRev
// against the leader key at that revision.
func (g *Guard) checkTerm(ctx context.Context, term uint64, modRev int64) error {
	f, err := g.fenceFor(ctx, modRev)
	if err != nil {
		return err
	}
	switch {
	case !f.exists:
		if term != 0 {
			return fmt.Errorf("%w: term %d but no leader key", ErrStaleTerm, term)
		}
	case modRev >= f.rev:
		if term != f.term {
			return fmt.Errorf("%w: term %d written at revision %d while term %d held the leader key",
				ErrStaleTerm, term, modRev, f.term)
		}
	default:
		if term >= f.term {
			return fmt.Errorf("%w: term %d written at revision %d, before term %d claimed the leader key",
				ErrStaleTerm, term, modRev, f.term)
		}
	}
	return nil
}

// fenceFor returns a view of the leader key read at modRev or later. When
// the cached view is older it reads the key again; concurrent callers (the
// intake checks the fires of one watch response in parallel) share one
// read rather than each sending their own.
func (g *Guard) fenceFor(ctx context.Context, modRev int64) (fenceView, error) {
	for {
		g.mu.Lock()
		f := g.fence
		if f.read && modRev <= f.readRev {
			g.mu.Unlock()
			return f, nil
		}
		if ch := g.reading; ch != nil {
			g.mu.Unlock()
			select {
			case <-ch:
				continue // look again: the read may cover modRev, or have failed
			case <-ctx.Done():
				return fenceView{}, fmt.Errorf("trust: read the leader key: %w", ctx.Err())
			}
		}
		ch := make(chan struct{})
		g.reading = ch
		g.mu.Unlock()
		f, err := g.readFence(ctx)
		g.mu.Lock()
		g.reading = nil
		if err == nil && f.readRev >= g.fence.readRev {
			g.fence = f
		}
		g.mu.Unlock()
		close(ch)
		return f, err
	}
}

// readFence reads the leader key.
func (g *Guard) readFence(ctx context.Context) (fenceView, error) {
	resp, err := g.cfg.Etcd.Get(ctx, g.cfg.Keys.Leader())
	if err != nil {
		return fenceView{}, fmt.Errorf("trust: read the leader key: %w", err)
	}
	f := fenceView{read: true, readRev: resp.Header.Revision}
	if len(resp.Kvs) > 0 {
		t, _, err := cluster.ParseLeaderValue(string(resp.Kvs[0].Value))
		if err != nil {
			return fenceView{}, fmt.Errorf("trust: %w", err)
		}
		f.exists, f.term, f.rev = true, t, resp.Kvs[0].ModRevision
	}
	return f, nil
}

// Refused reports whether err is a refusal (as opposed to a failure to
// read the leader key).
func Refused(err error) bool {
	return errors.Is(err, cluster.ErrUnsigned) || errors.Is(err, cluster.ErrBadSignature) ||
		errors.Is(err, ErrStaleTerm)
}

// Kind classifies a refusal error.
func Kind(err error) string {
	switch {
	case errors.Is(err, cluster.ErrUnsigned):
		return KindUnsigned
	case errors.Is(err, cluster.ErrBadSignature):
		return KindBadSignature
	case errors.Is(err, ErrStaleTerm):
		return KindStaleTerm
	}
	return KindMalformed
}

// Refuse handles a refused record: it deletes the key if it still holds
// the refused value (mod revision), logs the refusal and reports it.
func (g *Guard) Refuse(ctx context.Context, kv *mvccpb.KeyValue, err error) {
	key := string(kv.Key)
	ev := Event{At: time.Now().UTC(), Kind: Kind(err), Key: key, Reason: err.Error()}
	g.log.Error("trust: refused a record; not acting on it", "key", key, "kind", ev.Kind, "reason", ev.Reason,
		"mod_revision", kv.ModRevision)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, derr := g.cfg.Etcd.Txn(dctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpDelete(key)).Commit(); derr != nil {
		g.log.Warn("trust: deleting a refused record", "key", key, "error", derr)
	}
	if g.cfg.Report != nil {
		g.cfg.Report(ev)
	}
}
