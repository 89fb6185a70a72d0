package alert

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	httpplugin "github.com/cronix/cronix/plugins/http"
	"github.com/cronix/cronix/server/store"
)

// Payload is the JSON body of a "json" webhook, in the Standard Webhooks
// shape: a type, a timestamp and the data.
type Payload struct {
	Type      string      `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      PayloadData `json:"data"`
}

// PayloadData is the event in a webhook payload.
type PayloadData struct {
	EventID         int64     `json:"event_id"`
	Key             string    `json:"key"`
	Kind            string    `json:"kind"`
	JobID           int64     `json:"job_id,omitempty"`
	JobName         string    `json:"job_name,omitempty"`
	Group           string    `json:"group,omitempty"`
	RunID           int64     `json:"run_id,omitempty"`
	FireID          string    `json:"fire_id,omitempty"`
	Node            string    `json:"node,omitempty"`
	Status          string    `json:"status,omitempty"`
	ExitCode        *int      `json:"exit_code,omitempty"`
	Message         string    `json:"message,omitempty"`
	OutputTail      string    `json:"output_tail,omitempty"`
	Link            string    `json:"link,omitempty"`
	SuppressedCount int       `json:"suppressed_count"`
	OccurredAt      time.Time `json:"occurred_at"`
}

// WebhookID is the webhook-id header of an event: the same on every attempt.
func WebhookID(eventID int64) string { return "cronix-alert-" + strconv.FormatInt(eventID, 10) }

// Sign returns the webhook-signature header value of a body:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)),
// where key is the base64-decoded part after "whsec_" of a secret with that
// prefix, otherwise the secret's bytes.
func Sign(secret, id string, timestamp int64, body []byte) (string, error) {
	key := []byte(secret)
	if rest, ok := strings.CutPrefix(secret, "whsec_"); ok {
		var err error
		if key, err = base64.StdEncoding.DecodeString(rest); err != nil {
			return "", fmt.Errorf("webhook secret: whsec_ prefix needs base64 after it: %w", err)
		}
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.", id, timestamp)
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// webhookBody renders the body of an event in the webhook's format.
func webhookBody(set Settings, w Webhook, ev *store.AlertEvent, now time.Time) ([]byte, error) {
	text := subject(set.Language, ev) + "\n" + textBody(set.Language, ev)
	var v any
	switch w.Format {
	case FormatSlack:
		v = map[string]any{"text": text}
	case FormatDingTalk, FormatWeCom:
		v = map[string]any{"msgtype": "text", "text": map[string]string{"content": text}}
	case FormatFeishu:
		v = map[string]any{"msg_type": "text", "content": map[string]string{"text": text}}
	default:
		v = Payload{Type: ev.Kind, Timestamp: now.UTC(), Data: PayloadData{
			EventID: ev.ID, Key: ev.DedupeKey, Kind: ev.Kind, JobID: ev.JobID, JobName: ev.JobName, Group: ev.Group,
			RunID: ev.RunID, FireID: ev.FireID, Node: ev.Node, Status: ev.RunStatus, ExitCode: ev.ExitCode,
			Message: ev.Message, OutputTail: ev.OutputTail, Link: ev.Link, SuppressedCount: ev.SuppressedCount,
			OccurredAt: ev.OccurredAt,
		}}
	}
	return json.Marshal(v)
}

// httpClient is the webhook client: it dials only addresses the guard
// allows (checked on the resolved address, so DNS cannot get around it)
// and follows no redirects.
func (s *Service) httpClient() *http.Client {
	guard := httpplugin.Guard{AllowLoopback: s.cfg.WebhookAllowLoopback, AllowPrivate: s.cfg.WebhookAllowPrivate}
	dialer := &net.Dialer{Timeout: 10 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return fmt.Errorf("dial address %q: %w", address, err)
		}
		ip, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("dial address %q is not an IP: %w", address, err)
		}
		return guard.Check(ip)
	}}
	return &http.Client{
		Transport: &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: 10 * time.Second,
			ResponseHeaderTimeout: s.cfg.SendTimeout, MaxIdleConns: 4, IdleConnTimeout: 30 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// sendWebhook posts one event to a webhook; any 2xx answer is success.
func (s *Service) sendWebhook(ctx context.Context, set Settings, w Webhook, ev *store.AlertEvent) error {
	now := s.cfg.Now()
	body, err := webhookBody(set, w, ev, now)
	if err != nil {
		return fmt.Errorf("%w: encoding webhook body: %w", errPermanent, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%w: webhook %s request: %w", errPermanent, w.Name, err)
	}
	id, ts := WebhookID(ev.ID), now.Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Cronix-Alert/1")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	if w.Secret != "" {
		sig, err := Sign(w.Secret, id, ts, body)
		if err != nil {
			return fmt.Errorf("%w: webhook %s: %w", errPermanent, w.Name, err)
		}
		req.Header.Set("webhook-signature", sig)
	}
	client := s.httpClient()
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("webhook %s: %w", w.Name, err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook %s answered %s: %s", w.Name, resp.Status, strings.TrimSpace(string(snippet)))
	}
	return nil
}
