package raftha

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// session is one stretch of leadership in one term.
type session struct {
	term    uint64
	ctx     context.Context
	cancel  context.CancelFunc
	started bool           // callbacks started (guarded by Node.mu)
	stopped bool           // ctx cancelled; no callback may be added (guarded by Node.mu)
	fns     sync.WaitGroup // running callbacks
	done    chan struct{}  // closed when the session goroutine and its callbacks returned
}

// OnLeadership registers fn to run, in its own goroutine, each time this
// node gains leadership, once the FSM has applied every committed entry.
// ctx is cancelled when leadership is lost or the node closes; term is the
// raft term of that leadership. If the node is leading when fn is
// registered, fn starts at once for the current term. fn should return soon
// after ctx is cancelled: the next session waits for it.
func (n *Node) OnLeadership(fn func(ctx context.Context, term uint64)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closing {
		return
	}
	n.callbacks = append(n.callbacks, fn)
	if s := n.session; s != nil && s.started && !s.stopped {
		n.runCallbackLocked(s, fn)
	}
}

func (n *Node) runCallbackLocked(s *session, fn func(context.Context, uint64)) {
	s.fns.Add(1)
	go func() {
		defer s.fns.Done()
		fn(s.ctx, s.term)
	}()
}

// monitor is the single reader of raft's NotifyCh: every gain and loss of
// leadership is seen, in order.
func (n *Node) monitor() {
	defer close(n.monitorDone)
	for {
		select {
		case leader := <-n.notifyCh:
			n.mu.Lock()
			if leader {
				n.startSessionLocked(n.raft.CurrentTerm())
			} else {
				n.stopSessionLocked()
			}
			n.mu.Unlock()
		case <-n.closeCh:
			n.mu.Lock()
			n.stopSessionLocked()
			n.mu.Unlock()
			return
		}
	}
}

func (n *Node) startSessionLocked(term uint64) {
	if n.closing {
		return
	}
	n.stopSessionLocked() // a gain without a loss in between: end the old one anyway
	prev := n.last
	ctx, cancel := context.WithCancel(context.Background())
	s := &session{term: term, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	n.session = s
	n.last = s
	n.sessions.Add(1)
	go n.runSession(s, prev)
	n.log.Info("raft leadership gained", "term", term)
}

func (n *Node) stopSessionLocked() {
	s := n.session
	if s == nil {
		return
	}
	n.session = nil
	s.stopped = true
	s.cancel()
	n.log.Info("raft leadership ended", "term", s.term)
}

// runSession waits for the previous session to finish, runs a barrier, then
// starts the callbacks unless leadership was lost meanwhile, and waits for
// them to return after the session ends.
func (n *Node) runSession(s *session, prev *session) {
	defer n.sessions.Done()
	defer close(s.done)
	if prev != nil {
		<-prev.done
	}
	if !n.barrier(s) {
		return
	}
	if n.raft.State() != raft.Leader || n.raft.CurrentTerm() != s.term {
		n.log.Info("raft leadership changed before leader work started", "term", s.term,
			"current_term", n.raft.CurrentTerm())
		return
	}
	n.mu.Lock()
	if s.stopped {
		n.mu.Unlock()
		return
	}
	s.started = true
	for _, fn := range slices.Clone(n.callbacks) {
		n.runCallbackLocked(s, fn)
	}
	n.mu.Unlock()
	<-s.ctx.Done()
	// stopped is set before cancel under n.mu, so no callback is added now.
	s.fns.Wait()
}

// barrier waits until the FSM applied every entry committed before this
// term's leadership, retrying until it succeeds or the session ends.
func (n *Node) barrier(s *session) bool {
	backoff := 50 * time.Millisecond
	for {
		err := n.raft.Barrier(n.cfg.ApplyTimeout).Error()
		if err == nil {
			return true
		}
		if s.ctx.Err() != nil {
			return false
		}
		n.log.Warn("raft barrier failed; retrying", "term", s.term, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-s.ctx.Done():
			t.Stop()
			return false
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
