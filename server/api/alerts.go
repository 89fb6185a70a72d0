package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/store"
)

// Alerts is the alerting service the API uses (satisfied by *alert.Service).
type Alerts interface {
	Settings(ctx context.Context) (alert.Settings, error)
	FlagSettings() alert.Settings
	PutSettings(ctx context.Context, next alert.Settings, by string) (alert.Settings, error)
	SendTest(ctx context.Context, to []string, webhook string) ([]alert.TestResult, error)
	FindEvents(ctx context.Context, f store.AlertEventFilter, p store.Page) ([]store.AlertEvent, int, error)
}

var _ Alerts = (*alert.Service)(nil)

// errNoAlerts answers alert routes of a handler built without alerting.
var errNoAlerts = &statusError{http.StatusServiceUnavailable, "alerting is not configured on this replica"}

// alertRoutes registers GET /alerts, POST /alerts/test and GET/PUT
// /settings/alerting (admin only, but for the list).
func (s *server) alertRoutes(r *mux.Router, v1 string) {
	r.Handle(v1+"/alerts", s.user(MaxBodyBytes, s.listAlerts)).Methods(http.MethodGet)
	r.Handle(v1+"/alerts/test", s.admin(MaxBodyBytes, s.testAlert)).Methods(http.MethodPost)
	r.Handle(v1+"/settings/alerting", s.admin(MaxBodyBytes, s.getAlertSettings)).Methods(http.MethodGet)
	r.Handle(v1+"/settings/alerting", s.admin(MaxBodyBytes, s.putAlertSettings)).Methods(http.MethodPut)
}

// admin wraps the handler of an admin route: like user, the role check is
// authz.Routes' business (enforced by authorize); the name says what the
// route table holds for it.
func (s *server) admin(limit int64, h handlerFunc) http.Handler {
	return s.user(limit, h)
}

// AlertEvent is an alert event as GET /api/v1/alerts shows it.
type AlertEvent struct {
	ID               int64           `json:"id"`
	Key              string          `json:"key"`
	Kind             string          `json:"kind"`
	JobID            int64           `json:"job_id"`
	JobName          string          `json:"job_name"`
	Group            string          `json:"group"`
	RunID            int64           `json:"run_id"`
	FireID           string          `json:"fire_id"`
	Node             string          `json:"node"`
	RunStatus        string          `json:"run_status"`
	ExitCode         *int            `json:"exit_code"`
	Message          string          `json:"message"`
	OutputTail       string          `json:"output_tail"`
	Link             string          `json:"link"`
	OccurredAt       Time            `json:"occurred_at"`
	Suppressed       bool            `json:"suppressed"`
	SuppressedReason string          `json:"suppressed_reason"`
	SuppressedCount  int             `json:"suppressed_count"`
	CreatedAt        Time            `json:"created_at"`
	Status           string          `json:"status"`
	Deliveries       []AlertDelivery `json:"deliveries"`
}

// AlertDelivery is one channel target of an event with its attempts.
type AlertDelivery struct {
	ID            int64    `json:"id"`
	Channel       string   `json:"channel"`
	Target        string   `json:"target"`
	Recipients    []string `json:"recipients"`
	Status        string   `json:"status"`
	Attempts      int      `json:"attempts"`
	LastError     string   `json:"last_error"`
	NextAttemptAt Time     `json:"next_attempt_at"`
	SentAt        Time     `json:"sent_at"`
}

// eventStatus sums up an event's deliveries: suppressed, none (no target),
// failed if any failed, pending if any is pending, else sent.
func eventStatus(ev *store.AlertEvent) string {
	if ev.Suppressed {
		return "suppressed"
	}
	if len(ev.Deliveries) == 0 {
		return "none"
	}
	st := store.DeliverySent
	for _, d := range ev.Deliveries {
		switch d.Status {
		case store.DeliveryFailed:
			return store.DeliveryFailed
		case store.DeliveryPending:
			st = store.DeliveryPending
		}
	}
	return st
}

func alertEventFromStore(ev *store.AlertEvent) AlertEvent {
	out := AlertEvent{
		ID: ev.ID, Key: ev.DedupeKey, Kind: ev.Kind, JobID: ev.JobID, JobName: ev.JobName, Group: ev.Group,
		RunID: ev.RunID, FireID: ev.FireID, Node: ev.Node, RunStatus: ev.RunStatus, ExitCode: ev.ExitCode,
		Message: ev.Message, OutputTail: ev.OutputTail, Link: ev.Link, OccurredAt: Time{ev.OccurredAt},
		Suppressed: ev.Suppressed, SuppressedReason: ev.SuppressedReason, SuppressedCount: ev.SuppressedCount,
		CreatedAt: Time{ev.CreatedAt}, Status: eventStatus(ev), Deliveries: make([]AlertDelivery, 0, len(ev.Deliveries)),
	}
	for _, d := range ev.Deliveries {
		ad := AlertDelivery{
			ID: d.ID, Channel: d.Channel, Target: d.Target, Recipients: d.Recipients, Status: d.Status,
			Attempts: d.Attempts, LastError: d.LastError, NextAttemptAt: Time{d.NextAttemptAt},
		}
		if ad.Recipients == nil {
			ad.Recipients = []string{}
		}
		if d.SentAt != nil {
			ad.SentAt = Time{*d.SentAt}
		}
		out.Deliveries = append(out.Deliveries, ad)
	}
	return out
}

// listAlerts handles GET /api/v1/alerts?kind=&job_id=&status=&page=&page_size=.
func (s *server) listAlerts(w http.ResponseWriter, r *http.Request) error {
	if s.alerts == nil {
		return errNoAlerts
	}
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var f store.AlertEventFilter
	fields := map[string]string{}
	if f.Kind = strings.TrimSpace(q.Get("kind")); f.Kind != "" && !slices.Contains(alert.Kinds, f.Kind) {
		fields["kind"] = fmt.Sprintf("unknown kind %q; want one of %s", f.Kind, strings.Join(alert.Kinds, ", "))
	}
	if v := q.Get("job_id"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			fields["job_id"] = "job_id must be a positive integer"
		}
		f.JobID = id
	}
	switch st := strings.TrimSpace(q.Get("status")); st {
	case "":
	case "suppressed":
		yes := true
		f.Suppressed = &yes
	case store.DeliveryPending, store.DeliverySent, store.DeliveryFailed:
		f.Status = st
	default:
		fields["status"] = fmt.Sprintf("unknown status %q; want pending, sent, failed or suppressed", st)
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid alert filter", Fields: fields}
	}
	evs, total, err := s.alerts.FindEvents(r.Context(), f, p)
	if err != nil {
		return fmt.Errorf("list alert events: %w", err)
	}
	out := List[AlertEvent]{Items: make([]AlertEvent, 0, len(evs)), Total: total, Page: p.Page, PageSize: p.PageSize}
	for i := range evs {
		out.Items = append(out.Items, alertEventFromStore(&evs[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// AlertTestRequest is the optional body of POST /api/v1/alerts/test.
type AlertTestRequest struct {
	// To overrides the e-mail recipients (default: the admin e-mails).
	To []string `json:"to"`
	// Webhook sends to this webhook only (and no e-mail).
	Webhook string `json:"webhook"`
}

// AlertTestResponse is the body of POST /api/v1/alerts/test.
type AlertTestResponse struct {
	Results []alert.TestResult `json:"results"`
}

// testAlert handles POST /api/v1/alerts/test.
func (s *server) testAlert(w http.ResponseWriter, r *http.Request) error {
	if s.alerts == nil {
		return errNoAlerts
	}
	var req AlertTestRequest
	if err := decodeJSON(r, &req, true); err != nil && !errors.Is(err, errEmptyBody) {
		return err
	}
	for _, a := range req.To {
		if err := (alert.Settings{AdminEmails: []string{a}}).Validate(); err != nil {
			return invalidField("to", fmt.Sprintf("%q is not an e-mail address", a))
		}
	}
	res, err := s.alerts.SendTest(r.Context(), req.To, req.Webhook)
	if errors.Is(err, alert.ErrUnknownWebhook) {
		return invalidField("webhook", fmt.Sprintf("no webhook named %q", req.Webhook))
	}
	if err != nil {
		return fmt.Errorf("test alert: %w", err)
	}
	if len(res) == 0 {
		return &ValidationError{Message: "nothing to send to: configure SMTP with recipients or a webhook first"}
	}
	writeJSON(w, http.StatusOK, AlertTestResponse{Results: res})
	return nil
}

// AlertSettingsResponse is the body of GET and PUT /api/v1/settings/alerting:
// the effective settings without secrets, which secrets are set, and which
// fields flags/env set (those override what PUT stores).
type AlertSettingsResponse struct {
	alert.Settings
	// PasswordSet tells whether an SMTP password is stored (it is never returned).
	PasswordSet bool `json:"password_set"`
	// WebhookSecretsSet lists the webhooks that have a signing secret.
	WebhookSecretsSet []string `json:"webhook_secrets_set"`
	// FromFlags lists the settings fields set by flags/env.
	FromFlags []string `json:"from_flags"`
}

func (s *server) alertSettingsResponse(ctx context.Context) (AlertSettingsResponse, error) {
	eff, err := s.alerts.Settings(ctx)
	if err != nil {
		return AlertSettingsResponse{}, fmt.Errorf("alert settings: %w", err)
	}
	out := AlertSettingsResponse{Settings: eff.Redacted(), PasswordSet: eff.SMTP.Password != "",
		WebhookSecretsSet: []string{}, FromFlags: alert.FlagFields(s.alerts.FlagSettings())}
	for _, wh := range eff.Webhooks {
		if wh.Secret != "" {
			out.WebhookSecretsSet = append(out.WebhookSecretsSet, wh.Name)
		}
	}
	if out.Webhooks == nil {
		out.Webhooks = []alert.Webhook{}
	}
	return out, nil
}

// getAlertSettings handles GET /api/v1/settings/alerting.
func (s *server) getAlertSettings(w http.ResponseWriter, r *http.Request) error {
	if s.alerts == nil {
		return errNoAlerts
	}
	out, err := s.alertSettingsResponse(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// putAlertSettings handles PUT /api/v1/settings/alerting: the body replaces
// the stored settings; an empty password or webhook secret keeps the
// stored one, and so does every field flags/env set.
func (s *server) putAlertSettings(w http.ResponseWriter, r *http.Request) error {
	if s.alerts == nil {
		return errNoAlerts
	}
	var req alert.Settings
	if err := decodeJSON(r, &req, true); err != nil {
		if errors.Is(err, errEmptyBody) {
			return &ValidationError{Message: "request body must be a JSON object"}
		}
		return err
	}
	_, err := s.alerts.PutSettings(r.Context(), req, userName(r.Context()))
	var fe alert.FieldErrors
	if errors.As(err, &fe) {
		return &ValidationError{Message: "invalid alerting settings", Fields: fe}
	}
	if err != nil {
		return fmt.Errorf("store alert settings: %w", err)
	}
	out, err := s.alertSettingsResponse(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
