package integration

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/integration/harness"
	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/alert/alerttest"
)

// startStandaloneAlerting starts a standalone with extra flags and environment.
func startStandaloneAlerting(t *testing.T, dataDir string, args, env []string) *standalone {
	t.Helper()
	var addrs [4]string
	for i := range addrs {
		a, err := harness.FreeAddr()
		require.NoError(t, err)
		addrs[i] = a
	}
	s := &standalone{
		etcdURL: "http://" + addrs[1],
		dataDir: dataDir,
		args: append([]string{"standalone", "--data-dir", dataDir, "--http-addr", addrs[0],
			"--etcd-client-addr", addrs[1], "--etcd-peer-addr", addrs[2], "--raft-addr", addrs[3]}, args...),
		env: append([]string{"CRONIX_ADMIN_PASSWORD=" + adminPassword}, env...),
		api: harness.NewClient("http://" + addrs[0]),
	}
	return startStandalone(t, dataDir, s)
}

// apiAlert is the part of GET /api/v1/alerts these tests read.
type apiAlert struct {
	ID              int64  `json:"id"`
	Key             string `json:"key"`
	Kind            string `json:"kind"`
	RunID           int64  `json:"run_id"`
	Suppressed      bool   `json:"suppressed"`
	SuppressedCount int    `json:"suppressed_count"`
	Status          string `json:"status"`
	Deliveries      []struct {
		Target    string `json:"target"`
		Status    string `json:"status"`
		Attempts  int    `json:"attempts"`
		LastError string `json:"last_error"`
	} `json:"deliveries"`
}

func alerts(t *testing.T, api *harness.Client, query string) []apiAlert {
	t.Helper()
	var out struct {
		Items []apiAlert `json:"items"`
	}
	code, err := api.Do(http.MethodGet, "/api/v1/alerts?page_size=500&"+query, nil, &out)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	return out.Items
}

func header(data, name string) string {
	m, err := mail.ReadMessage(strings.NewReader(data))
	if err != nil {
		return ""
	}
	v, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get(name))
	if err != nil {
		return m.Header.Get(name)
	}
	return v
}

func payload(t *testing.T, h alerttest.Hook) alert.Payload {
	t.Helper()
	var p alert.Payload
	require.NoError(t, json.Unmarshal(h.Body, &p))
	return p
}

// TestAlertMailPerFailureEpisode: a failing shell job with alarm_emails
// sends one mail (over STARTTLS with AUTH, the binary trusting the test CA
// through SSL_CERT_FILE) for its whole failure streak, with job, node,
// exit code and output tail, and one job.recovered mail after the first
// success, reporting the suppressed failures.
func TestAlertMailPerFailureEpisode(t *testing.T) {
	t.Parallel()
	smtp := alerttest.StartSMTP(t, alerttest.SMTPOptions{STARTTLS: true, Username: "cronix", Password: "it-smtp-pw"})
	dir := t.TempDir()
	s := startStandaloneAlerting(t, filepath.Join(dir, "data"), []string{
		"--alert-smtp-host", smtp.Host, "--alert-smtp-port", fmt.Sprint(smtp.Port), "--alert-smtp-security", "starttls",
		"--alert-smtp-username", "cronix", "--alert-smtp-from", "cronix@example.com",
	}, []string{"CRONIX_ALERT_SMTP_PASSWORD=it-smtp-pw", "SSL_CERT_FILE=" + smtp.CAFile})

	okFile := filepath.Join(dir, "ok")
	job, err := s.api.CreateJobBody(map[string]any{
		"name": "nightly-backup", "schedule": "*/1 * * * * *", "handler": "shell",
		"params":       map[string]any{"script": fmt.Sprintf("echo step one; if [ -f %s ]; then echo fine; exit 0; fi; echo 'error: disk full'; exit 3", okFile)},
		"alarm_emails": []string{"oncall@example.com"},
	})
	require.NoError(t, err)

	mails := smtp.WaitMails(t, 1, 90*time.Second)
	m := mails[0]
	require.True(t, m.TLS)
	require.Equal(t, "cronix", m.User)
	require.Equal(t, []string{"oncall@example.com"}, m.To)
	subject := header(m.Data, "Subject")
	require.True(t, strings.HasPrefix(subject, "[Cronix] nightly-backup failed on "), subject)
	node := strings.TrimPrefix(subject, "[Cronix] nightly-backup failed on ")
	require.NotEmpty(t, node)
	require.Contains(t, m.Data, "Exit code: 3")
	require.Contains(t, m.Data, "error: disk full")
	require.Contains(t, m.Data, "Node: "+node)
	require.NotContains(t, m.Data, "it-smtp-pw")

	// More failures of the same episode: recorded, suppressed, no mail.
	require.Eventually(t, func() bool {
		return len(alerts(t, s.api, fmt.Sprintf("job_id=%d&kind=run.failed", job.ID))) >= 6
	}, 90*time.Second, 200*time.Millisecond)
	require.Len(t, smtp.Mails(), 1, "one mail per failure episode")

	require.NoError(t, os.WriteFile(okFile, nil, 0o600))
	mails = smtp.WaitMails(t, 2, 90*time.Second)
	require.Equal(t, "[Cronix] nightly-backup recovered on "+node, header(mails[1].Data, "Subject"))
	require.Contains(t, mails[1].Data, "similar alerts of this job were suppressed")
	rec := alerts(t, s.api, fmt.Sprintf("job_id=%d&kind=job.recovered", job.ID))
	require.Len(t, rec, 1)
	require.GreaterOrEqual(t, rec[0].SuppressedCount, 5)

	// Successes go on: no more mail (wait for three more successful runs).
	runs := waitRuns(t, s.api, job.ID, 60*time.Second, func(r []harness.Run) bool {
		n := 0
		for _, x := range r {
			if x.Status == "success" {
				n++
			}
		}
		return n >= 4
	})
	require.NotEmpty(t, runs)
	require.Len(t, smtp.Mails(), 2)
}

// TestAlertWebhookRetryRestartAndScheduleMissed: a webhook answering 500
// twice gets the event, signed, on the third attempt although the server
// restarts between attempts; a job whose group lost its only node raises
// schedule.missed within threshold + 5 s of the fire.
func TestAlertWebhookRetryRestartAndScheduleMissed(t *testing.T) {
	t.Parallel()
	const secret = "whsec_aW50ZWdyYXRpb24tdGVzdC1rZXk="
	retry := alerttest.StartWebhook(t, secret, func(n int) int {
		if n <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	missed := alerttest.StartWebhook(t, secret, nil)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	s := startStandaloneAlerting(t, dataDir, []string{"--alert-webhook-allow-loopback", "--alert-retry-base", "3s",
		"--alert-missed-threshold", "2s"}, nil)
	code, err := s.api.Do(http.MethodPut, "/api/v1/settings/alerting", map[string]any{"webhooks": []map[string]any{
		{"name": "retry", "url": retry.URL, "secret": secret, "kinds": []string{"run.failed"}},
		{"name": "missed", "url": missed.URL, "secret": secret, "kinds": []string{"schedule.missed"}},
	}}, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)

	job, err := s.api.CreateJobBody(map[string]any{"name": "fails-once", "schedule_type": "none", "handler": "shell",
		"params": map[string]any{"script": "echo nope; exit 2"}})
	require.NoError(t, err)
	code, err = s.api.Do(http.MethodPost, fmt.Sprintf("/api/v1/jobs/%d/trigger", job.ID), nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code)
	retry.WaitFor(t, 90*time.Second, "first attempt", func(h []alerttest.Hook) bool { return len(h) >= 1 })
	require.Eventually(t, func() bool {
		a := alerts(t, s.api, "kind=run.failed")
		return len(a) == 1 && len(a[0].Deliveries) == 1 && a[0].Deliveries[0].Attempts == 1
	}, 30*time.Second, 100*time.Millisecond, "the first attempt is recorded")

	// Restart between attempts.
	require.NoError(t, s.proc.Interrupt(30*time.Second))
	require.Len(t, retry.Hooks(), 1)
	s = startStandalone(t, dataDir, s)
	hooks := retry.WaitFor(t, 90*time.Second, "third attempt", func(h []alerttest.Hook) bool { return len(h) >= 3 })
	require.Eventually(t, func() bool {
		a := alerts(t, s.api, "kind=run.failed")
		return len(a) == 1 && a[0].Status == "sent"
	}, 30*time.Second, 100*time.Millisecond)
	a := alerts(t, s.api, "kind=run.failed")[0]
	require.Equal(t, 3, a.Deliveries[0].Attempts)
	require.Len(t, retry.Hooks(), 3)
	for i, h := range hooks {
		require.True(t, h.SignatureOK, "attempt %d signed", i+1)
		require.Equal(t, hooks[0].ID, h.ID)
		p := payload(t, h)
		require.Equal(t, "run.failed", p.Type)
		require.Equal(t, "fails-once", p.Data.JobName)
		require.Equal(t, 2, *p.Data.ExitCode)
		require.Contains(t, p.Data.OutputTail, "nope")
	}
	require.Equal(t, []int{500, 500, 200}, []int{hooks[0].Status, hooks[1].Status, hooks[2].Status})

	// schedule.missed: the group's only node dies; fires find no node.
	nodeDir := filepath.Join(dir, "orphan-node")
	node, _ := startNode(t, s, nodeToken(t, dataDir), nodeDir, "orphans")
	require.Eventually(t, func() bool { return len(liveNodes(t, s.api, "orphans")) == 1 }, 30*time.Second, 100*time.Millisecond)
	orphan, err := s.api.CreateJobBody(map[string]any{"name": "orphan", "group": "orphans", "schedule": "*/1 * * * * *",
		"handler": "shell", "params": map[string]any{"script": "true"}})
	require.NoError(t, err)
	node.Kill()
	var got alerttest.Hook
	var at time.Time
	missed.WaitFor(t, 90*time.Second, "schedule.missed", func(h []alerttest.Hook) bool {
		if len(h) > 0 && at.IsZero() {
			got, at = h[0], time.Now()
		}
		return len(h) > 0
	})
	require.True(t, got.SignatureOK)
	p := payload(t, got)
	require.Equal(t, "schedule.missed", p.Type)
	require.Equal(t, orphan.ID, p.Data.JobID)
	var run harness.Run
	code, err = s.api.Do(http.MethodGet, fmt.Sprintf("/api/v1/runs/%d", p.Data.RunID), nil, &run)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	late := at.Sub(run.ScheduledAt)
	t.Logf("schedule.missed delivered %s after the fire was due (threshold 2s)", late)
	require.Less(t, late, 2*time.Second+5*time.Second)
}

// TestAlertHAKill9AndNoLeader: a failure alert pending (the receiver
// answers 500) when the leader is killed with SIGKILL is delivered once by
// the surviving replicas; with two of three replicas down, the survivor
// raises cluster.no_leader.
func TestAlertHAKill9AndNoLeader(t *testing.T) {
	t.Parallel()
	const secret = "ha-webhook-secret"
	var healthy atomic.Bool
	hook := alerttest.StartWebhook(t, secret, func(int) int {
		if healthy.Load() {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	u, err := url.Parse(hook.URL)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", u.Hostname())
	dir := t.TempDir()
	c, err := harness.StartCluster(harness.ClusterConfig{Binary: binary, Dir: dir, AdminPassword: adminPassword,
		NodeToken: "alert-node-token", Env: []string{
			"CRONIX_ALERT_WEBHOOK_URL=" + hook.URL, "CRONIX_ALERT_WEBHOOK_SECRET=" + secret,
			"CRONIX_ALERT_WEBHOOK_ALLOW_LOOPBACK=true", "CRONIX_ALERT_RETRY_BASE=1s", "CRONIX_ALERT_NO_LEADER_AFTER=3s",
		}})
	require.NoError(t, err)
	t.Cleanup(func() { c.CloseKeepingLogs(t, fmt.Sprintf("cronix-alert-ha-%d", time.Now().UnixNano())) })
	_, _, err = c.StartNode(filepath.Join(dir, "node1"), "default", "--lease-ttl", "3s")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(liveNodes(t, c.API(), "default")) == 1 }, 30*time.Second, 100*time.Millisecond)

	job, err := c.API().CreateJobBody(map[string]any{"name": "ha-fails", "schedule_type": "none", "handler": "shell",
		"params": map[string]any{"script": "echo broken; exit 4"}})
	require.NoError(t, err)
	code, err := c.API().Do(http.MethodPost, fmt.Sprintf("/api/v1/jobs/%d/trigger", job.ID), nil, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, code)
	hook.WaitFor(t, 90*time.Second, "a failed attempt", func(h []alerttest.Hook) bool { return len(h) >= 1 })
	require.Eventually(t, func() bool {
		a := alerts(t, c.API(), "kind=run.failed")
		return len(a) == 1 && len(a[0].Deliveries) == 1 && a[0].Deliveries[0].Attempts >= 1 && a[0].Status == "pending"
	}, 30*time.Second, 100*time.Millisecond, "a failed attempt is recorded; the alert is pending")

	leader, err := c.Leader(30*time.Second, -1)
	require.NoError(t, err)
	c.Kill9(leader)
	t.Logf("kill -9 leader %s while the alert is pending", c.Replicas[leader].ID)
	healthy.Store(true)
	newLeader, err := c.Leader(60*time.Second, leader)
	require.NoError(t, err)
	api := c.Replicas[newLeader].API

	failedID := ""
	require.Eventually(t, func() bool {
		for _, h := range hook.Hooks() {
			if h.Status == http.StatusOK && payload(t, h).Type == "run.failed" {
				failedID = h.ID
				return true
			}
		}
		return false
	}, 150*time.Second, 100*time.Millisecond, "delivered after the leader's death")
	require.Eventually(t, func() bool {
		a := alerts(t, api, "kind=run.failed")
		return len(a) == 1 && a[0].Status == "sent"
	}, 30*time.Second, 100*time.Millisecond)

	// no_leader: stop one of the two survivors (graceful), leaving one.
	other := -1
	for i := range c.Replicas {
		if i != leader && i != newLeader {
			other = i
		}
	}
	require.NoError(t, c.Interrupt(newLeader, 30*time.Second))
	t.Logf("stopped %s; %s is alone", c.Replicas[newLeader].ID, c.Replicas[other].ID)
	hook.WaitFor(t, 90*time.Second, "cluster.no_leader", func(h []alerttest.Hook) bool {
		for _, x := range h {
			if x.Status == http.StatusOK && payload(t, x).Type == "cluster.no_leader" {
				return true
			}
		}
		return false
	})

	// Not doubled: the failure alert was acknowledged once, and the new
	// leader's re-scan raised nothing new.
	oks := map[string]int{}
	for _, h := range hook.Hooks() {
		require.True(t, h.SignatureOK)
		if h.Status == http.StatusOK {
			oks[h.ID]++
		}
	}
	require.Equal(t, 1, oks[failedID], "the failure alert is delivered once")
	for id, n := range oks {
		require.Equal(t, 1, n, "webhook %s acknowledged %d times", id, n)
	}
	a := alerts(t, c.Replicas[other].API, "kind=run.failed")
	require.Len(t, a, 1)
}
