package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/pluginapi"
	"github.com/cronix/cronix/pluginapi/plugintest"
)

const module = "github.com/cronix/cronix"

// TestImportsOnlyThePluginSDK proves the example is a true third-party
// plugin: of the Cronix module it may import pluginapi (and its
// subpackages) only, tests included. It lists ".", so it holds in the
// repository and in a module of your own that copied this template.
func TestImportsOnlyThePluginSDK(t *testing.T) {
	t.Parallel()
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-test", ".").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	var foreign []string
	seenSDK := false
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		pkg = strings.TrimSuffix(strings.TrimSuffix(pkg, ".test"), "_test")
		if pkg != module && !strings.HasPrefix(pkg, module+"/") {
			continue
		}
		switch {
		case pkg == module+"/plugins/example":
		case pkg == module+"/pluginapi" || strings.HasPrefix(pkg, module+"/pluginapi/"):
			seenSDK = true
		default:
			foreign = append(foreign, pkg)
		}
	}
	require.True(t, seenSDK, "go list output looks wrong: %s", out)
	require.Empty(t, foreign, "the example plugin must import nothing from Cronix but pluginapi")
}

// webhook is a fake Slack-compatible webhook recording what it received.
type webhook struct {
	mu   sync.Mutex
	msgs []map[string]string
}

func (wh *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/slow" {
		// The server notices the client going away only once the body was read.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
		return
	}
	if r.URL.Path == "/gone" {
		http.Error(w, "no_service", http.StatusNotFound)
		return
	}
	var m map[string]string
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "bad", http.StatusBadRequest)
		return
	}
	wh.mu.Lock()
	wh.msgs = append(wh.msgs, m)
	wh.mu.Unlock()
	_, _ = io.WriteString(w, "ok")
}

func TestContract(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(&webhook{})
	t.Cleanup(srv.Close)
	plugintest.CheckContract(t, newNotifier(nil),
		json.RawMessage(fmt.Sprintf(`{"webhook_url":%q,"text":"hi"}`, srv.URL+"/hook")),
		plugintest.LongRunning(json.RawMessage(fmt.Sprintf(`{"webhook_url":%q,"text":"hi"}`, srv.URL+"/slow"))))
}

func TestPostsTheMessage(t *testing.T) {
	t.Parallel()
	wh := &webhook{}
	srv := httptest.NewServer(wh)
	t.Cleanup(srv.Close)
	h := plugintest.Connect(t, newNotifier(nil))
	raw, _ := json.Marshal(params{WebhookURL: srv.URL + "/hook", Text: "{{job_name}} (#{{job_id}}) ran at {{scheduled_at}}", Channel: "#ops"})
	var out strings.Builder
	res, err := h.Run(t.Context(), pluginapi.Request{JobID: 4, JobName: "backup", Params: raw,
		ScheduledAt: time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)}, &out)
	require.NoError(t, err)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusSuccess, Message: "sent"}, res)
	require.Equal(t, "webhook answered 200 OK\nok\n", out.String())
	wh.mu.Lock()
	require.Equal(t, []map[string]string{{"text": "backup (#4) ran at 2026-03-01T02:00:00Z", "channel": "#ops"}}, wh.msgs)
	wh.mu.Unlock()

	raw, _ = json.Marshal(params{WebhookURL: srv.URL + "/gone", Text: "x"})
	res, err = h.Run(t.Context(), pluginapi.Request{Params: raw}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, pluginapi.Result{Status: pluginapi.StatusFailed, ExitCode: 404, Message: "webhook answered 404 Not Found"}, res)
}

func TestValidate(t *testing.T) {
	t.Parallel()
	h := newNotifier(nil)
	for raw, field := range map[string]string{
		`{"webhook_url":"https://hooks.example.com/x","text":"hi"}`: "-",
		`{"text":"hi"}`: "webhook_url",
		`{"webhook_url":"hooks.example.com","text":"hi"}`:                          "webhook_url",
		`{"webhook_url":"https://h.example.com"}`:                                  "text",
		`{"webhook_url":"https://h.example.com","text":"x","emoji":1}`:             "emoji",
		`{"webhook_url":"https://h.example.com","text":5}`:                         "text",
		`{"webhook_url":"https://h.example.com","text":"x","timeout_seconds":900}`: "timeout_seconds",
		`[]`: "",
	} {
		err := h.Validate(t.Context(), json.RawMessage(raw))
		if field == "-" {
			require.NoError(t, err, raw)
			continue
		}
		ip, ok := pluginapi.AsInvalidParams(err)
		require.True(t, ok, "%s: %v", raw, err)
		require.Equal(t, field, ip.Field(), raw)
	}
}
