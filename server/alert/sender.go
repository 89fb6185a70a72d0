package alert

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cronix/cronix/internal/waitctx"
	"github.com/cronix/cronix/server/store"
)

// sendBatch bounds the deliveries read per pass.
const sendBatch = 50

// errPermanent marks a delivery error that no retry can fix.
var errPermanent = errors.New("permanent")

// RunSender delivers due deliveries every PollInterval (or at once after a
// local Raise) until ctx is done. Every replica runs it: a delivery is sent
// only by the replica that claimed it.
func (s *Service) RunSender(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake:
		}
		if err := s.sendDue(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("alert delivery pass failed; retrying", "err", err)
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		t.Reset(s.cfg.PollInterval)
	}
}

// sendDue makes one delivery pass.
func (s *Service) sendDue(ctx context.Context) error {
	set, err := s.Settings(ctx)
	if err != nil {
		return err
	}
	due, err := s.cfg.Store.DueAlertDeliveries(ctx, s.cfg.Now(), sendBatch)
	if err != nil {
		return fmt.Errorf("alert: list due deliveries: %w", err)
	}
	events := map[int64]*store.AlertEvent{}
	for _, d := range due {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		now := s.cfg.Now()
		ok, err := s.cfg.Store.ClaimAlertDelivery(ctx, d.ID, now, now.Add(s.cfg.ClaimTTL))
		if err != nil {
			return fmt.Errorf("alert: claim delivery %d: %w", d.ID, err)
		}
		if !ok {
			continue // another replica has it
		}
		ev, ok := events[d.EventID]
		if !ok {
			if ev, err = s.cfg.Store.GetAlertEvent(ctx, d.EventID); err != nil {
				return fmt.Errorf("alert: read event %d of delivery %d: %w", d.EventID, d.ID, err)
			}
			events[d.EventID] = ev
		}
		sendErr := s.send(ctx, set, ev, d)
		// Record the outcome even when ctx ended during the send (a
		// graceful stop): an unrecorded send is repeated after ClaimTTL.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err = s.cfg.Store.RecordAlertAttempt(rctx, d.ID, s.attempt(d, sendErr))
		cancel()
		if err != nil {
			return fmt.Errorf("alert: record attempt of delivery %d: %w", d.ID, err)
		}
		log := s.log.With("event_id", ev.ID, "kind", ev.Kind, "channel", d.Channel, "target", d.Target,
			"attempt", d.Attempts+1)
		if sendErr != nil {
			log.Warn("alert delivery attempt failed", "err", sendErr)
		} else {
			log.Info("alert delivered")
		}
		s.countSend(d.Channel, sendErr)
	}
	return nil
}

// attempt is the record of an attempt that ended with err.
func (s *Service) attempt(d store.AlertDelivery, err error) store.AlertAttempt {
	if err == nil {
		return store.AlertAttempt{}
	}
	n := d.Attempts + 1
	a := store.AlertAttempt{Err: err.Error()}
	if n >= s.cfg.MaxAttempts || errors.Is(err, errPermanent) {
		a.Final = true
		return a
	}
	a.NextAttemptAt = s.cfg.Now().Add(s.backoff(n))
	return a
}

// backoff is the wait after the n-th failed attempt: RetryBase doubled per
// attempt, at most RetryMax.
func (s *Service) backoff(n int) time.Duration {
	d := s.cfg.RetryBase
	for i := 1; i < n && d < s.cfg.RetryMax; i++ {
		d *= 2
	}
	return min(d, s.cfg.RetryMax)
}

// stopGrace is how long an attempt in flight may go on after a graceful
// stop began (ctx done), so that a receiver that got it is recorded as
// sent rather than cut off, recorded as failed and sent again.
const stopGrace = 5 * time.Second

// send makes one attempt of a delivery, within SendTimeout; a stop (ctx
// done) cuts it off only after stopGrace.
func (s *Service) send(ctx context.Context, set Settings, ev *store.AlertEvent, d store.AlertDelivery) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.SendTimeout)
	defer cancel()
	// The grace ends early when the attempt does (sctx cancelled on return).
	defer context.AfterFunc(ctx, func() {
		if waitctx.Sleep(sctx, stopGrace) {
			cancel()
		}
	})()
	ctx = sctx
	switch d.Channel {
	case ChannelEmail:
		return s.sendMail(ctx, set, ev, d)
	case ChannelWebhook:
		for _, w := range set.Webhooks {
			if w.Name == d.Target {
				return s.sendWebhook(ctx, set, w, ev)
			}
		}
		return fmt.Errorf("%w: webhook %q is no longer configured", errPermanent, d.Target)
	}
	return fmt.Errorf("%w: unknown channel %q", errPermanent, d.Channel)
}

// countSend counts one delivery attempt in the metrics.
func (s *Service) countSend(channel string, err error) {
	if s.cfg.Metrics == nil {
		return
	}
	outcome := OutcomeSent
	if err != nil {
		outcome = OutcomeFailed
	}
	s.cfg.Metrics.AlertSent(channel, outcome)
}

// Outcomes of a delivery attempt, as Recorder counts them.
const (
	OutcomeSent   = "sent"
	OutcomeFailed = "failed"
)
