package alert

import (
	"context"
	"fmt"

	"github.com/cronix/cronix/server/store"
)

// TestResult is the outcome of a test send to one target.
type TestResult struct {
	Channel string `json:"channel"`
	Target  string `json:"target"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
}

// SendTest sends a test alert now, bypassing the outbox and throttling: an
// e-mail to to (the admin e-mails when empty) if SMTP is set up, and a
// webhook call to each webhook, or only to the one named webhook. It
// returns one result per target; with nothing configured, none.
func (s *Service) SendTest(ctx context.Context, to []string, webhook string) ([]TestResult, error) {
	set, err := s.Settings(ctx)
	if err != nil {
		return nil, err
	}
	ev := &store.AlertEvent{
		Kind: KindTest, DedupeKey: "test", Message: "This is a test alert from Cronix.", OccurredAt: s.cfg.Now().UTC(),
		Link: link(set, s.cfg.BaseURL, Event{}),
	}
	results := []TestResult{}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SendTimeout)
	defer cancel()
	if webhook == "" {
		rcpts := dedupe(to)
		if len(rcpts) == 0 {
			rcpts = dedupe(set.AdminEmails)
		}
		if set.SMTP.Host != "" && len(rcpts) > 0 {
			err := s.sendMail(ctx, set, ev, store.AlertDelivery{Channel: ChannelEmail, Target: ChannelEmail, Recipients: rcpts})
			results = append(results, result(ChannelEmail, ChannelEmail, err))
		}
	}
	found := false
	for _, w := range set.Webhooks {
		if webhook != "" && w.Name != webhook {
			continue
		}
		found = true
		results = append(results, result(ChannelWebhook, w.Name, s.sendWebhook(ctx, set, w, ev)))
	}
	if webhook != "" && !found {
		return nil, fmt.Errorf("%w: no webhook named %q", ErrUnknownWebhook, webhook)
	}
	return results, nil
}

// ErrUnknownWebhook: a test send named a webhook that is not configured.
var ErrUnknownWebhook = fmt.Errorf("unknown webhook")

func result(channel, target string, err error) TestResult {
	r := TestResult{Channel: channel, Target: target, OK: err == nil}
	if err != nil {
		r.Error = err.Error()
	}
	return r
}
