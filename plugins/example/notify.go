package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/cronix/cronix/pluginapi"
)

const (
	handlerName    = "notify"
	handlerVersion = "1.0.0"
	// defaultTimeout bounds one webhook call when the job sets none.
	defaultTimeout = 30 * time.Second
	// maxReply is how much of the webhook's reply is kept as output.
	maxReply = 64 << 10
)

// params are the notify handler's job params.
type params struct {
	// WebhookURL is the incoming webhook's URL. Required.
	WebhookURL string `json:"webhook_url"`
	// Text is the message; {{job_name}}, {{job_id}}, {{fire_id}},
	// {{scheduled_at}} and {{attempt}} are replaced. Required.
	Text string `json:"text"`
	// Username overrides the poster's name where the service allows it.
	Username string `json:"username,omitempty"`
	// Channel overrides the target channel where the service allows it.
	Channel string `json:"channel,omitempty"`
	// TimeoutSeconds bounds the call; 0 = 30 s.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
}

const paramsSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "Chat notification",
  "type": "object",
  "properties": {
    "webhook_url": {"type": "string", "title": "Webhook URL", "description": "Slack-compatible incoming webhook (https:// or http://).", "pattern": "^https?://"},
    "text": {"type": "string", "title": "Message", "description": "{{job_name}}, {{job_id}}, {{fire_id}}, {{scheduled_at}} and {{attempt}} are replaced.", "minLength": 1},
    "username": {"type": "string", "title": "Post as"},
    "channel": {"type": "string", "title": "Channel"},
    "timeout_seconds": {"type": "integer", "title": "Timeout (s)", "minimum": 0, "maximum": 300}
  },
  "required": ["webhook_url", "text"],
  "additionalProperties": false
}`

// notifier is the "notify" handler.
type notifier struct {
	client *http.Client
}

var _ pluginapi.Handler = (*notifier)(nil)

// newNotifier returns the handler; nil client means a default one.
func newNotifier(client *http.Client) *notifier {
	if client == nil {
		client = &http.Client{}
	}
	return &notifier{client: client}
}

func (n *notifier) Info(context.Context) (pluginapi.Info, error) {
	return pluginapi.Info{
		Name:         handlerName,
		Version:      handlerVersion,
		Description:  "Posts a message to a Slack-compatible incoming webhook.",
		ParamsSchema: json.RawMessage(paramsSchema),
	}, nil
}

func (n *notifier) Validate(_ context.Context, raw json.RawMessage) error {
	_, err := parse(raw)
	return err
}

// parse decodes and checks params, naming the offending field.
func parse(raw json.RawMessage) (params, error) {
	var p params
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '{' {
		return p, pluginapi.InvalidParams("", "params must be a JSON object")
	}
	if err := dec.Decode(&p); err != nil {
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return p, pluginapi.InvalidParams(strings.Trim(field, `"`), "unknown field")
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return p, pluginapi.InvalidParams(te.Field, "has the wrong type")
		}
		return p, pluginapi.InvalidParams("", "params are not valid JSON")
	}
	u, err := url.Parse(strings.TrimSpace(p.WebhookURL))
	switch {
	case p.WebhookURL == "":
		return p, pluginapi.InvalidParams("webhook_url", "is required")
	case err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "":
		return p, pluginapi.InvalidParams("webhook_url", "must be an absolute http(s) URL")
	}
	if strings.TrimSpace(p.Text) == "" {
		return p, pluginapi.InvalidParams("text", "is required")
	}
	if p.TimeoutSeconds < 0 || p.TimeoutSeconds > 300 {
		return p, pluginapi.InvalidParams("timeout_seconds", "must be from 0 to 300")
	}
	return p, nil
}

// Run posts the message. A 2xx reply is success; any other status fails
// the run (exit code = status). A network failure is a retryable error.
func (n *notifier) Run(ctx context.Context, req pluginapi.Request, out io.Writer) (pluginapi.Result, error) {
	p, err := parse(req.Params)
	if err != nil {
		return fail(-1, err.Error()), err
	}
	timeout := defaultTimeout
	if p.TimeoutSeconds > 0 {
		timeout = time.Duration(p.TimeoutSeconds) * time.Second
	}
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	msg := map[string]string{"text": expand(p.Text, req)}
	if p.Username != "" {
		msg["username"] = p.Username
	}
	if p.Channel != "" {
		msg["channel"] = p.Channel
	}
	body, _ := json.Marshal(msg)
	hreq, err := http.NewRequestWithContext(callCtx, http.MethodPost, p.WebhookURL, bytes.NewReader(body))
	if err != nil {
		err = pluginapi.Permanent(err)
		return fail(-1, err.Error()), err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("User-Agent", "cronix-plugin-notify/"+handlerVersion)
	resp, err := n.client.Do(hreq)
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return fail(-1, "timeout"), nil
		case ctx.Err() != nil:
			return fail(-1, "killed"), nil
		}
		err = pluginapi.Retryable(fmt.Errorf("posting to the webhook: %w", err))
		return fail(-1, err.Error()), err
	}
	defer resp.Body.Close()
	reply, _ := io.ReadAll(io.LimitReader(resp.Body, maxReply))
	fmt.Fprintf(out, "webhook answered %s\n%s\n", resp.Status, reply)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fail(resp.StatusCode, "webhook answered "+resp.Status), nil
	}
	return pluginapi.Result{Status: pluginapi.StatusSuccess, Message: "sent"}, nil
}

// expand replaces the run placeholders in text.
func expand(text string, req pluginapi.Request) string {
	scheduled := ""
	if !req.ScheduledAt.IsZero() {
		scheduled = req.ScheduledAt.UTC().Format(time.RFC3339)
	}
	return strings.NewReplacer(
		"{{job_name}}", req.JobName,
		"{{job_id}}", strconv.FormatInt(req.JobID, 10),
		"{{fire_id}}", req.FireID,
		"{{scheduled_at}}", scheduled,
		"{{attempt}}", strconv.Itoa(req.Attempt),
	).Replace(text)
}

func fail(code int, msg string) pluginapi.Result {
	return pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: code, Message: msg}
}
