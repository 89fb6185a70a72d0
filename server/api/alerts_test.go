package api_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/internal/syncbuf"
	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/alert/alerttest"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/auth"
	"github.com/cronix/cronix/server/embedetcd/etcdtest"
	"github.com/cronix/cronix/server/store"
)

// alertBundle is an API server with alerting, an admin and a plain user.
type alertBundle struct {
	*bundle
	svc       *alert.Service
	userToken string
}

func setupAlerts(t *testing.T) *alertBundle {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "cronix.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	_, _, err = auth.EnsureAdmin(ctx, st, adminPassword)
	require.NoError(t, err)
	hash, err := auth.HashPassword("user-pw")
	require.NoError(t, err)
	require.NoError(t, st.CreateUser(ctx, &store.User{Username: "bob", PasswordHash: hash, Role: store.RoleOperator}))
	svc, err := alert.New(alert.Config{Store: st, BaseURL: "http://cronix.test", WebhookAllowLoopback: true,
		Flags: alert.Settings{AdminEmails: []string{"ops@example.com"}}})
	require.NoError(t, err)
	b := &bundle{t: t, ctx: ctx, store: st, etcd: etcdtest.Client(t), keys: cluster.NewKeys(""), logs: &syncbuf.Buffer{}}
	h := api.New(api.Config{Store: st, Etcd: b.etcd, Keys: b.keys, Location: time.UTC, NodeToken: nodeToken,
		Logger: slog.New(slog.NewTextHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Alerts: svc,
		Security: svc})
	b.srv = httptest.NewServer(h)
	t.Cleanup(b.srv.Close)
	login := func(user, pw string) string {
		var out api.LoginResponse
		b.doJSON(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": user, "password": pw},
			http.StatusOK, &out)
		return out.Token
	}
	b.token = login("admin", adminPassword)
	return &alertBundle{bundle: b, svc: svc, userToken: login("bob", "user-pw")}
}

func TestAlertSettingsAPI(t *testing.T) {
	t.Parallel()
	b := setupAlerts(t)
	const path = "/api/v1/settings/alerting"

	// Admin only.
	require.Equal(t, "your role does not allow this", b.errorOf(http.MethodGet, path, b.userToken, nil, http.StatusForbidden).Error)
	b.errorOf(http.MethodPut, path, b.userToken, map[string]any{}, http.StatusForbidden)
	b.errorOf(http.MethodPost, "/api/v1/alerts/test", b.userToken, nil, http.StatusForbidden)
	b.errorOf(http.MethodGet, path, "", nil, http.StatusUnauthorized)

	put := map[string]any{
		"smtp": map[string]any{"host": "mail.example.com", "port": 2525, "security": "starttls",
			"username": "cronix", "password": "smtp-secret-pw", "from": "cronix@example.com"},
		"webhooks":        []map[string]any{{"name": "ops", "url": "https://hooks.example.com/x", "secret": "hook-secret"}},
		"group_emails":    map[string][]string{"default": {"team@example.com"}},
		"throttle_window": "5m",
	}
	var got api.AlertSettingsResponse
	b.doJSON(http.MethodPut, path, b.token, put, http.StatusOK, &got)
	require.Equal(t, "mail.example.com", got.SMTP.Host)
	require.Empty(t, got.SMTP.Password)
	require.True(t, got.PasswordSet)
	require.Equal(t, []string{"ops"}, got.WebhookSecretsSet)
	require.Equal(t, alert.Duration(5*time.Minute), got.ThrottleWindow)
	require.Equal(t, []string{"admin_emails"}, got.FromFlags)
	require.Equal(t, []string{"ops@example.com"}, got.AdminEmails)

	code, body := b.do(http.MethodGet, path, b.token, nil)
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, string(body), "smtp-secret-pw")
	require.NotContains(t, string(body), "hook-secret")
	require.Contains(t, string(body), `"password_set":true`)

	// Bad input: field-level 400, nothing changes.
	bad := b.errorOf(http.MethodPut, path, b.token, map[string]any{
		"smtp":            map[string]any{"host": "x", "from": "nope", "security": "ssl"},
		"webhooks":        []map[string]any{{"name": "ops", "url": "file:///etc/passwd"}},
		"throttle_window": "-1m",
	}, http.StatusBadRequest)
	require.Contains(t, bad.Fields, "smtp.from")
	require.Contains(t, bad.Fields, "smtp.security")
	require.Contains(t, bad.Fields, "webhooks[0].url")
	require.Contains(t, bad.Fields, "throttle_window")
	b.errorOf(http.MethodPut, path, b.token, map[string]any{"smtpp": 1}, http.StatusBadRequest)
	b.errorOf(http.MethodPut, path, b.token, map[string]any{"throttle_window": "soon"}, http.StatusBadRequest)
	var after api.AlertSettingsResponse
	b.doJSON(http.MethodGet, path, b.token, nil, http.StatusOK, &after)
	require.Equal(t, got, after)
	eff, err := b.svc.Settings(t.Context())
	require.NoError(t, err)
	require.Equal(t, "smtp-secret-pw", eff.SMTP.Password, "the stored password is kept")

	// The password never reaches the logs.
	require.NotContains(t, b.logs.String(), "smtp-secret-pw")
}

// TestAlertSettingsPutKeepsFlaggedFields: admin_emails is set by a flag, so
// writing back the settings as read (the flag's value in them, as the web
// admin does) or another value leaves the stored admin_emails as they were.
func TestAlertSettingsPutKeepsFlaggedFields(t *testing.T) {
	t.Parallel()
	b := setupAlerts(t)
	const path = "/api/v1/settings/alerting"
	// Stored before the flag was given (a PUT now would not store it).
	require.NoError(t, b.store.PutSetting(t.Context(), "alerting",
		`{"admin_emails":["stored@example.com"],"language":"zh-CN"}`, "admin"))

	var read api.AlertSettingsResponse
	b.doJSON(http.MethodGet, path, b.token, nil, http.StatusOK, &read)
	require.Equal(t, []string{"ops@example.com"}, read.AdminEmails, "the flag wins")
	require.Equal(t, []string{"admin_emails"}, read.FromFlags)
	back := read.Settings
	back.Language = "en"
	b.doJSON(http.MethodPut, path, b.token, back, http.StatusOK, nil)
	b.doJSON(http.MethodPut, path, b.token, map[string]any{"admin_emails": []string{"other@example.com"},
		"language": "en"}, http.StatusOK, nil)

	raw, err := b.store.GetSetting(t.Context(), "alerting")
	require.NoError(t, err)
	var stored alert.Settings
	require.NoError(t, json.Unmarshal([]byte(raw), &stored))
	require.Equal(t, []string{"stored@example.com"}, stored.AdminEmails, "a flagged field keeps its stored value")
	require.Equal(t, "en", stored.Language, "the other fields are replaced")
}

func TestAlertsListAndTestSend(t *testing.T) {
	t.Parallel()
	b := setupAlerts(t)
	hook := alerttest.StartWebhook(t, "whsec_dGVzdC1rZXk=", nil)

	// Nothing configured: nothing to send to.
	b.errorOf(http.MethodPost, "/api/v1/alerts/test", b.token, nil, http.StatusBadRequest)
	b.doJSON(http.MethodPut, "/api/v1/settings/alerting", b.token, map[string]any{
		"webhooks": []map[string]any{{"name": "ops", "url": hook.URL, "secret": hook.Secret}},
	}, http.StatusOK, nil)
	var res api.AlertTestResponse
	b.doJSON(http.MethodPost, "/api/v1/alerts/test", b.token, map[string]any{"webhook": "ops"}, http.StatusOK, &res)
	require.Equal(t, []alert.TestResult{{Channel: "webhook", Target: "ops", OK: true}}, res.Results)
	hooks := hook.Hooks()
	require.Len(t, hooks, 1)
	require.True(t, hooks[0].SignatureOK)
	bad := b.errorOf(http.MethodPost, "/api/v1/alerts/test", b.token, map[string]any{"webhook": "nope"}, http.StatusBadRequest)
	require.Contains(t, bad.Fields, "webhook")
	bad = b.errorOf(http.MethodPost, "/api/v1/alerts/test", b.token, map[string]any{"to": []string{"x"}}, http.StatusBadRequest)
	require.Contains(t, bad.Fields, "to")

	require.NoError(t, b.svc.Raise(t.Context(), alert.Event{Kind: alert.KindSecurity, Key: "security:1", Node: "n1",
		Message: "plugin checksum mismatch"}))
	var list api.List[api.AlertEvent]
	b.doJSON(http.MethodGet, "/api/v1/alerts?kind=security", b.userToken, nil, http.StatusOK, &list)
	require.Equal(t, 1, list.Total)
	ev := list.Items[0]
	require.Equal(t, "security:1", ev.Key)
	require.Equal(t, "pending", ev.Status)
	require.Len(t, ev.Deliveries, 1)
	require.Equal(t, "ops", ev.Deliveries[0].Target)
	raw, err := json.Marshal(list)
	require.NoError(t, err)
	require.NotContains(t, string(raw), hook.Secret)

	b.doJSON(http.MethodGet, "/api/v1/alerts?status=sent", b.userToken, nil, http.StatusOK, &list)
	require.Zero(t, list.Total)
	e := b.errorOf(http.MethodGet, "/api/v1/alerts?kind=bogus&status=x&job_id=-1", b.userToken, nil, http.StatusBadRequest)
	require.Len(t, e.Fields, 3)
	require.True(t, strings.HasPrefix(e.Fields["kind"], "unknown kind"))
}

// TestAlertSettingsErrorsNameTheField: a value of the alerting settings
// that does not decode (a duration, a port, a nested webhook field) is a
// 400 on its JSON path, and nothing changes.
func TestAlertSettingsErrorsNameTheField(t *testing.T) {
	t.Parallel()
	b := setupAlerts(t)
	const path = "/api/v1/settings/alerting"
	var before api.AlertSettingsResponse
	b.doJSON(http.MethodGet, path, b.token, nil, http.StatusOK, &before)
	for body, want := range map[string]map[string]string{
		`{"throttle_window":"abc"}`:               {"throttle_window": `want a duration such as "10m": time: invalid duration "abc"`},
		`{"missed_threshold":true}`:               {"missed_threshold": `want a duration such as "10m"`},
		`{"smtp":{"host":"mail","port":"25"}}`:    {"smtp.port": "must be an integer, not string"},
		`{"webhooks":[{"name":"a","url":["x"]}]}`: {"webhooks[0].url": "must be a string, not array"},
		`{"admin_emails":"ops@example.com"}`:      {"admin_emails": "must be an array, not string"},
	} {
		e := b.errorOf(http.MethodPut, path, b.token, body, http.StatusBadRequest)
		require.Equal(t, want, e.Fields, body)
	}
	var after api.AlertSettingsResponse
	b.doJSON(http.MethodGet, path, b.token, nil, http.StatusOK, &after)
	require.Equal(t, before, after)
}

// TestAlertSettingsRefuseABadSMTPHost: an SMTP host with a space, a newline
// or a NUL is a 400 on smtp.host, and nothing is stored.
func TestAlertSettingsRefuseABadSMTPHost(t *testing.T) {
	t.Parallel()
	b := setupAlerts(t)
	const path = "/api/v1/settings/alerting"
	for body, msg := range map[string]string{
		`{"smtp":{"host":"mail host","from":"c@example.com"}}`:  "want a host name or an IP address",
		`{"smtp":{"host":"mail\nhost","from":"c@example.com"}}`: "want a host name or an IP address",
		`{"smtp":{"host":"mail:25","from":"c@example.com"}}`:    "no port",
		`{"smtp":{"host":"mail\u0000","from":"c@example.com"}}`: `host must not contain a NUL character (\u0000)`,
	} {
		e := b.errorOf(http.MethodPut, path, b.token, body, http.StatusBadRequest)
		require.Contains(t, e.Fields["smtp.host"], msg, body)
	}
	var after api.AlertSettingsResponse
	b.doJSON(http.MethodGet, path, b.token, nil, http.StatusOK, &after)
	require.Empty(t, after.SMTP.Host)
	b.doJSON(http.MethodPut, path, b.token, map[string]any{"smtp": map[string]any{"host": "mail.example.com",
		"from": "c@example.com"}}, http.StatusOK, &after)
	require.Equal(t, "mail.example.com", after.SMTP.Host)
}
