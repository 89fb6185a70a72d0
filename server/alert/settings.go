package alert

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"net/netip"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"
)

// SMTP security modes.
const (
	SecurityStartTLS = "starttls" // plain connection upgraded with STARTTLS (required)
	SecurityTLS      = "tls"      // implicit TLS from the first byte (SMTPS)
	SecurityNone     = "none"     // no encryption
)

// Webhook body formats.
const (
	FormatJSON     = "json"     // the Cronix event payload (Standard Webhooks style)
	FormatSlack    = "slack"    // {"text": ...}
	FormatDingTalk = "dingtalk" // {"msgtype":"text","text":{"content":...}}
	FormatFeishu   = "feishu"   // {"msg_type":"text","content":{"text":...}}
	FormatWeCom    = "wecom"    // {"msgtype":"text","text":{"content":...}}
)

// Languages of messages.
const (
	LangEN   = "en"
	LangZhCN = "zh-CN"
)

// Defaults of Settings.
const (
	DefaultThrottleWindow  = 10 * time.Minute
	DefaultMissedThreshold = 30 * time.Second
	DefaultNoLeaderAfter   = 30 * time.Second
)

// Settings are the alerting settings (GET/PUT /api/v1/settings/alerting).
// The zero value sends nothing: no SMTP host, no webhooks.
type Settings struct {
	// SMTP is the mail server; an empty Host disables e-mail.
	SMTP SMTP `json:"smtp"`
	// Webhooks receive every event of their group (or of all groups).
	Webhooks []Webhook `json:"webhooks"`
	// GroupEmails are default recipients per group appname, added to a
	// job's alarm e-mails.
	GroupEmails map[string][]string `json:"group_emails"`
	// AdminEmails receive events about no job (cluster.no_leader, security).
	AdminEmails []string `json:"admin_emails"`
	// ThrottleWindow: at most one delivered event per job and kind in it.
	ThrottleWindow Duration `json:"throttle_window"`
	// MissedThreshold: a fire not dispatched this long after it was due
	// raises schedule.missed.
	MissedThreshold Duration `json:"missed_threshold"`
	// NoLeaderAfter: no raft leader for this long raises cluster.no_leader.
	NoLeaderAfter Duration `json:"no_leader_after"`
	// Language of messages: "en" (default) or "zh-CN".
	Language string `json:"language"`
	// PublicURL is the web admin's base URL used in links ("" = the
	// server's advertised URL).
	PublicURL string `json:"public_url"`
}

// SMTP is the mail server.
type SMTP struct {
	Host string `json:"host"`
	// Port; 0 = 587 for starttls, 465 for tls, 25 for none.
	Port int `json:"port"`
	// Security is "starttls" (default), "tls" or "none".
	Security string `json:"security"`
	// Username and Password authenticate (SMTP AUTH PLAIN/LOGIN) when
	// Username is set. The password is write-only: never returned.
	Username string `json:"username"`
	Password string `json:"password,omitempty"`
	// From is the sender address.
	From string `json:"from"`
}

// Webhook is one webhook target.
type Webhook struct {
	// Name identifies the webhook (unique; deliveries refer to it).
	Name string `json:"name"`
	URL  string `json:"url"`
	// Secret signs the body (Standard Webhooks, HMAC-SHA256); a "whsec_"
	// prefix means the rest is the base64 key. Write-only.
	Secret string `json:"secret,omitempty"`
	// Group limits it to one group's events ("" = every event).
	Group string `json:"group"`
	// Format of the body: json (default), slack, dingtalk, feishu, wecom.
	Format string `json:"format"`
	// Kinds limits it to these event kinds (empty = all).
	Kinds []string `json:"kinds"`
}

// Duration is a time.Duration written as a Go duration string ("10m").
type Duration time.Duration

// MarshalJSON writes "10m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "10m" (or a number of seconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n float64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return errors.New(`want a duration such as "10m"`)
		}
		*d = Duration(time.Duration(n * float64(time.Second)))
		return nil
	}
	if s == "" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as \"10m\": %w", err)
	}
	*d = Duration(v)
	return nil
}

// withDefaults fills zero durations and the language.
func (s Settings) withDefaults() Settings {
	if s.ThrottleWindow == 0 {
		s.ThrottleWindow = Duration(DefaultThrottleWindow)
	}
	if s.MissedThreshold == 0 {
		s.MissedThreshold = Duration(DefaultMissedThreshold)
	}
	if s.NoLeaderAfter == 0 {
		s.NoLeaderAfter = Duration(DefaultNoLeaderAfter)
	}
	if s.Language == "" {
		s.Language = LangEN
	}
	if s.SMTP.Security == "" {
		s.SMTP.Security = SecurityStartTLS
	}
	if s.SMTP.Port == 0 {
		switch s.SMTP.Security {
		case SecurityTLS:
			s.SMTP.Port = 465
		case SecurityNone:
			s.SMTP.Port = 25
		default:
			s.SMTP.Port = 587
		}
	}
	for i := range s.Webhooks {
		if s.Webhooks[i].Format == "" {
			s.Webhooks[i].Format = FormatJSON
		}
	}
	return s
}

// Redacted is s without its secrets (the SMTP password, webhook secrets).
func (s Settings) Redacted() Settings {
	s.SMTP.Password = ""
	hooks := make([]Webhook, len(s.Webhooks))
	for i, w := range s.Webhooks {
		w.Secret = ""
		hooks[i] = w
	}
	s.Webhooks = hooks
	return s
}

var webhookName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// FieldErrors maps JSON field paths to what is wrong with them.
type FieldErrors map[string]string

func (f FieldErrors) Error() string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + f[k]
	}
	return "invalid alerting settings (" + strings.Join(parts, "; ") + ")"
}

// Validate checks every field; the error is a FieldErrors.
func (s Settings) Validate() error {
	f := FieldErrors{}
	if s.SMTP.Host != "" || s.SMTP.From != "" {
		switch {
		case s.SMTP.Host == "":
			f["smtp.host"] = "required when smtp.from is set"
		case !validHost(s.SMTP.Host):
			f["smtp.host"] = "want a host name or an IP address (no port: that is smtp.port; no spaces)"
		}
		if _, err := mail.ParseAddress(s.SMTP.From); err != nil {
			f["smtp.from"] = "want an e-mail address"
		}
	}
	if s.SMTP.Port < 0 || s.SMTP.Port > 65535 {
		f["smtp.port"] = "want 1..65535 (0 = the default of the security mode)"
	}
	switch s.SMTP.Security {
	case "", SecurityStartTLS, SecurityTLS, SecurityNone:
	default:
		f["smtp.security"] = `want "starttls", "tls" or "none"`
	}
	if s.SMTP.Password != "" && s.SMTP.Username == "" {
		f["smtp.username"] = "required when a password is set"
	}
	seen := map[string]bool{}
	for i, w := range s.Webhooks {
		p := fmt.Sprintf("webhooks[%d].", i)
		switch {
		case !webhookName.MatchString(w.Name):
			f[p+"name"] = "want 1 to 64 of [A-Za-z0-9_.-]"
		case seen[w.Name]:
			f[p+"name"] = "duplicate webhook name"
		}
		seen[w.Name] = true
		if u, err := url.Parse(w.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			f[p+"url"] = "want an absolute http or https URL"
		}
		switch w.Format {
		case "", FormatJSON, FormatSlack, FormatDingTalk, FormatFeishu, FormatWeCom:
		default:
			f[p+"format"] = "want json, slack, dingtalk, feishu or wecom"
		}
		for _, k := range w.Kinds {
			if !knownKind(k) {
				f[p+"kinds"] = fmt.Sprintf("unknown event kind %q", k)
			}
		}
	}
	for g, list := range s.GroupEmails {
		if msg := checkEmails(list); msg != "" {
			f["group_emails."+g] = msg
		}
	}
	if msg := checkEmails(s.AdminEmails); msg != "" {
		f["admin_emails"] = msg
	}
	if s.ThrottleWindow < 0 {
		f["throttle_window"] = "must not be negative"
	}
	if s.MissedThreshold < 0 {
		f["missed_threshold"] = "must not be negative"
	}
	if s.NoLeaderAfter < 0 {
		f["no_leader_after"] = "must not be negative"
	}
	switch s.Language {
	case "", LangEN, LangZhCN:
	default:
		f["language"] = `want "en" or "zh-CN"`
	}
	if s.PublicURL != "" {
		if u, err := url.Parse(s.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			f["public_url"] = "want an absolute http or https URL"
		}
	}
	if len(f) > 0 {
		return f
	}
	return nil
}

// validHost reports whether h is an IP address or a DNS name (at most 253
// characters, dot-separated labels of 1 to 63 letters, digits, "-" not
// first or last, and "_"): what a mail server is dialled by.
func validHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' ||
			strings.TrimLeft(label, hostChars) != "" {
			return false
		}
	}
	return true
}

const hostChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

func checkEmails(list []string) string {
	for _, a := range list {
		if _, err := mail.ParseAddress(a); err != nil {
			return fmt.Sprintf("%q is not an e-mail address", a)
		}
	}
	return ""
}

func knownKind(k string) bool {
	for _, x := range Kinds {
		if x == k {
			return true
		}
	}
	return false
}

// KeepSecrets returns next with the secrets of prev where next leaves them
// empty: the SMTP password when the username is unchanged, and the secret
// of a webhook of the same name. That is how a client that read the
// redacted settings can write them back without re-entering secrets.
func KeepSecrets(prev, next Settings) Settings {
	if next.SMTP.Password == "" && next.SMTP.Username == prev.SMTP.Username {
		next.SMTP.Password = prev.SMTP.Password
	}
	old := map[string]string{}
	for _, w := range prev.Webhooks {
		old[w.Name] = w.Secret
	}
	hooks := make([]Webhook, len(next.Webhooks))
	for i, w := range next.Webhooks {
		if w.Secret == "" {
			w.Secret = old[w.Name]
		}
		hooks[i] = w
	}
	next.Webhooks = hooks
	return next
}

// flagField is one top-level part of Settings that flags/env can set.
type flagField struct {
	name string                            // its JSON name
	set  func(Settings) bool               // whether s sets it (non-zero)
	take func(dst *Settings, src Settings) // copies it from src into dst
}

// flagFields are the parts of Settings flags/env can set, each one a unit:
// flags setting the SMTP host set the whole smtp object.
var flagFields = []flagField{
	{"smtp", func(s Settings) bool { return s.SMTP.Host != "" }, func(d *Settings, s Settings) { d.SMTP = s.SMTP }},
	{"webhooks", func(s Settings) bool { return len(s.Webhooks) > 0 }, func(d *Settings, s Settings) { d.Webhooks = s.Webhooks }},
	{"group_emails", func(s Settings) bool { return len(s.GroupEmails) > 0 }, func(d *Settings, s Settings) { d.GroupEmails = s.GroupEmails }},
	{"admin_emails", func(s Settings) bool { return len(s.AdminEmails) > 0 }, func(d *Settings, s Settings) { d.AdminEmails = s.AdminEmails }},
	{"throttle_window", func(s Settings) bool { return s.ThrottleWindow != 0 }, func(d *Settings, s Settings) { d.ThrottleWindow = s.ThrottleWindow }},
	{"missed_threshold", func(s Settings) bool { return s.MissedThreshold != 0 }, func(d *Settings, s Settings) { d.MissedThreshold = s.MissedThreshold }},
	{"no_leader_after", func(s Settings) bool { return s.NoLeaderAfter != 0 }, func(d *Settings, s Settings) { d.NoLeaderAfter = s.NoLeaderAfter }},
	{"language", func(s Settings) bool { return s.Language != "" }, func(d *Settings, s Settings) { d.Language = s.Language }},
	{"public_url", func(s Settings) bool { return s.PublicURL != "" }, func(d *Settings, s Settings) { d.PublicURL = s.PublicURL }},
}

// Overlay merges settings given by flags/env (config as code) over the
// stored ones: every field o sets wins.
func Overlay(stored, o Settings) Settings {
	out := stored
	for _, f := range flagFields {
		if f.set(o) {
			f.take(&out, o)
		}
	}
	return out
}

// FlagFields names the fields of Settings that o (the flags/env) sets, in
// JSON spelling; never nil.
func FlagFields(o Settings) []string {
	out := []string{}
	for _, f := range flagFields {
		if f.set(o) {
			out = append(out, f.name)
		}
	}
	return out
}

// KeepFlagged returns next with the stored (prev) value of every field o
// (the flags/env) sets. Flags win over what is stored anyway, and a client
// writes back the effective settings it read (flag values included): this
// keeps those from replacing the stored values, which take effect again
// once the flag is dropped.
func KeepFlagged(prev, next, o Settings) Settings {
	for _, f := range flagFields {
		if f.set(o) {
			f.take(&next, prev)
		}
	}
	return next
}
