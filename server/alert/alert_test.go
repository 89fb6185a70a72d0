package alert_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/mail"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/internal/syncbuf"
	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/alert/alerttest"
	"github.com/cronix/cronix/server/store"
)

const waitLong = 60 * time.Second

// bundle is one test's store, clock and services.
type bundle struct {
	t     *testing.T
	dsn   string
	store *store.Store
	// offset is added to the wall clock of every service (throttle tests).
	offset atomic.Int64
}

func newBundle(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{t: t, dsn: "sqlite://" + filepath.Join(t.TempDir(), "cronix.db")}
	b.store = b.open()
	return b
}

func (b *bundle) open() *store.Store {
	b.t.Helper()
	s, err := store.Open(b.t.Context(), b.dsn)
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = s.Close() })
	return s
}

func (b *bundle) now() time.Time { return time.Now().Add(time.Duration(b.offset.Load())) }

// service builds a Service on st with fast test intervals.
func (b *bundle) service(st *store.Store, mod func(*alert.Config)) *alert.Service {
	b.t.Helper()
	cfg := alert.Config{
		Store: st, Now: b.now, BaseURL: "http://cronix.test", WebhookAllowLoopback: true,
		PollInterval: 50 * time.Millisecond, ScanInterval: 50 * time.Millisecond, Settle: 10 * time.Millisecond,
		RetryBase: 200 * time.Millisecond, SendTimeout: 20 * time.Second,
	}
	if mod != nil {
		mod(&cfg)
	}
	svc, err := alert.New(cfg)
	require.NoError(b.t, err)
	return svc
}

// run starts fn(ctx) and returns a stop function that cancels and waits;
// the test's cleanup stops it too.
func run(t *testing.T, fn func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { fn(ctx) })
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

func (b *bundle) job(name string, emails ...string) *store.Job {
	b.t.Helper()
	j := &store.Job{Name: name, Group: "default", ScheduleType: "cron", Schedule: "* * * * *", Handler: "shell",
		Params: json.RawMessage(`{"script":"exit 3"}`), Enabled: true, AlarmEmails: emails}
	require.NoError(b.t, b.store.CreateJob(b.t.Context(), j))
	return j
}

var fireSeq atomic.Int64

// result stores a finished run of job j on node.
func (b *bundle) result(j *store.Job, node, status string, code int, output string) string {
	b.t.Helper()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(fireSeq.Add(1)) * time.Second)
	fire := cluster.FireID(j.ID, at)
	now := time.Now()
	require.NoError(b.t, b.store.ApplyResults(b.t.Context(), []cluster.RunResult{{
		FireID: fire, JobID: j.ID, Trigger: cluster.TriggerSchedule, Node: node, Status: status,
		ScheduledAt: at, StartedAt: &now, FinishedAt: &now, ExitCode: &code, Output: output,
		Message: "exit status " + fmt.Sprint(code),
	}}))
	return fire
}

// waitEvents waits until the outbox holds n events and returns them, newest first.
func (b *bundle) waitEvents(n int) []store.AlertEvent {
	b.t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		evs, total, err := b.store.FindAlertEvents(b.t.Context(), store.AlertEventFilter{}, store.Page{Page: 1, PageSize: 100})
		require.NoError(b.t, err)
		// bun counts and selects in two statements: both must see n.
		if total >= n && len(evs) >= min(n, 100) {
			return evs
		}
		require.True(b.t, time.Now().Before(deadline), "want %d alert events, have %d", n, total)
		tick(50 * time.Millisecond)
	}
}

// waitDelivered waits until every delivery of every event is sent.
func (b *bundle) waitDelivered() {
	b.t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		_, total, err := b.store.FindAlertEvents(b.t.Context(), store.AlertEventFilter{Status: store.DeliveryPending},
			store.Page{Page: 1, PageSize: 1})
		require.NoError(b.t, err)
		if total == 0 {
			return
		}
		require.True(b.t, time.Now().Before(deadline), "%d events still have pending deliveries", total)
		tick(50 * time.Millisecond)
	}
}

// waitAttempts waits until the first event's first delivery has n attempts.
func (b *bundle) waitAttempts(n int) {
	b.t.Helper()
	deadline := time.Now().Add(waitLong)
	for {
		evs := b.waitEvents(1)
		if d := evs[len(evs)-1].Deliveries; len(d) > 0 && d[0].Attempts >= n {
			return
		}
		require.True(b.t, time.Now().Before(deadline), "want %d attempts", n)
		tick(50 * time.Millisecond)
	}
}

// tick paces a polling loop that waits on a condition with a deadline.
func tick(d time.Duration) { <-time.After(d) }

func (b *bundle) putSettings(svc *alert.Service, s alert.Settings) {
	b.t.Helper()
	_, err := svc.PutSettings(b.t.Context(), s, "admin")
	require.NoError(b.t, err)
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

// TestMailOncePerFailureEpisodeOverSTARTTLS: ten failures in a row give
// one run.failed mail (STARTTLS + AUTH) with job, node, exit code and the
// output tail; the first success gives job.recovered with the count of
// the nine suppressed failures.
func TestMailOncePerFailureEpisodeOverSTARTTLS(t *testing.T) {
	t.Parallel()
	smtp := alerttest.StartSMTP(t, alerttest.SMTPOptions{STARTTLS: true, Username: "cronix", Password: "smtp-pw-secret"})
	b := newBundle(t)
	svc := b.service(b.store, func(c *alert.Config) { c.TLSConfig = &tls.Config{RootCAs: smtp.RootCAs} })
	b.putSettings(svc, alert.Settings{
		SMTP: alert.SMTP{Host: smtp.Host, Port: smtp.Port, Security: alert.SecurityStartTLS,
			Username: "cronix", Password: "smtp-pw-secret", From: "cronix@example.com"},
		GroupEmails: map[string][]string{"default": {"team@example.com"}},
	})
	job := b.job("backup", "oncall@example.com")
	run(t, svc.RunScanner)
	run(t, svc.RunSender)

	for i := range 10 {
		b.result(job, "node-1", cluster.StatusFailed, 3, fmt.Sprintf("step %d\nerror: disk full\n", i))
	}
	evs := b.waitEvents(10)
	b.waitDelivered()
	mails := smtp.WaitMails(t, 1, waitLong)
	require.Len(t, mails, 1, "one mail per failure episode")
	m := mails[0]
	require.True(t, m.TLS, "sent after STARTTLS")
	require.Equal(t, "cronix", m.User)
	require.ElementsMatch(t, []string{"oncall@example.com", "team@example.com"}, m.To)
	require.Equal(t, "[Cronix] backup failed on node-1", header(m.Data, "Subject"))
	require.Contains(t, m.Data, "Exit code: 3")
	require.Contains(t, m.Data, "error: disk full")
	require.Contains(t, m.Data, "Node: node-1")
	require.Contains(t, m.Data, "http://cronix.test/runs/")
	require.Contains(t, m.Data, "text/html")
	require.NotContains(t, m.Data, "smtp-pw-secret")
	suppressed := 0
	for _, ev := range evs {
		if ev.Suppressed {
			suppressed++
			require.Equal(t, "failure_episode", ev.SuppressedReason)
			require.Empty(t, ev.Deliveries)
		}
	}
	require.Equal(t, 9, suppressed)

	b.result(job, "node-1", cluster.StatusSuccess, 0, "ok\n")
	mails = smtp.WaitMails(t, 2, waitLong)
	require.Equal(t, "[Cronix] backup recovered on node-1", header(mails[1].Data, "Subject"))
	require.Contains(t, mails[1].Data, "9 similar alerts of this job were suppressed")
	b.waitEvents(11)
	b.waitDelivered()
	require.Len(t, smtp.Mails(), 2)
}

// TestThrottleWindowCountsSuppressed: a flapping job (fail, success, ten
// times) inside the window gives one failure and one recovery mail; the
// next failure after the window reports the 18 suppressed events. Plain
// SMTP, zh-CN.
func TestThrottleWindowCountsSuppressed(t *testing.T) {
	t.Parallel()
	smtp := alerttest.StartSMTP(t, alerttest.SMTPOptions{})
	b := newBundle(t)
	svc := b.service(b.store, nil)
	b.putSettings(svc, alert.Settings{
		SMTP:           alert.SMTP{Host: smtp.Host, Port: smtp.Port, Security: alert.SecurityNone, From: "cronix@example.com"},
		ThrottleWindow: alert.Duration(time.Hour), Language: alert.LangZhCN,
	})
	job := b.job("flappy", "oncall@example.com")
	run(t, svc.RunScanner)
	run(t, svc.RunSender)
	for range 10 {
		b.result(job, "node-1", cluster.StatusFailed, 1, "x\n")
		b.result(job, "node-1", cluster.StatusSuccess, 0, "")
	}
	b.waitEvents(20)
	b.waitDelivered()
	mails := smtp.WaitMails(t, 2, waitLong)
	require.Len(t, mails, 2)
	require.False(t, mails[0].TLS)

	b.offset.Store(int64(2 * time.Hour)) // the window has passed
	b.result(job, "node-2", cluster.StatusFailed, 1, "x\n")
	mails = smtp.WaitMails(t, 3, waitLong)
	require.Contains(t, mails[2].Data, "18") // 9 failures + 9 recoveries were suppressed
	evs := b.waitEvents(21)
	require.Equal(t, 18, evs[0].SuppressedCount)
	require.False(t, evs[0].Suppressed)
}

// TestWebhookSignedRetriedAcrossRestart: the receiver answers 500 twice;
// the replica is restarted (store reopened, new service) after the first
// attempt; the third attempt delivers, every attempt signed alike.
func TestWebhookSignedRetriedAcrossRestart(t *testing.T) {
	t.Parallel()
	hook := alerttest.StartWebhook(t, "whsec_c2VjcmV0LWtleS1mb3ItdGVzdHM=", func(n int) int {
		if n <= 2 {
			return 500
		}
		return 200
	})
	b := newBundle(t)
	first := b.open()
	svc := b.service(first, nil)
	b.putSettings(svc, alert.Settings{Webhooks: []alert.Webhook{{Name: "ops", URL: hook.URL, Secret: hook.Secret}}})
	job := b.job("report")
	require.NoError(t, svc.Raise(t.Context(), alert.Event{Kind: alert.KindRunFailed, Key: "run.failed:test-1",
		JobID: job.ID, Node: "node-1", Message: "exit status 2"}))
	stop := run(t, svc.RunSender)
	hook.WaitFor(t, waitLong, "first attempt", func(h []alerttest.Hook) bool { return len(h) >= 1 })
	b.waitAttempts(1)
	stop() // the "server" goes down between attempts
	require.NoError(t, first.Close())

	second := b.open()
	run(t, b.service(second, nil).RunSender)
	hooks := hook.WaitFor(t, waitLong, "third attempt", func(h []alerttest.Hook) bool { return len(h) >= 3 })
	b.waitDelivered()
	require.Len(t, hook.Hooks(), 3)
	for _, h := range hooks {
		require.True(t, h.SignatureOK, "signature of %s", h.ID)
		require.Equal(t, hooks[0].ID, h.ID, "one webhook-id across attempts")
		var p alert.Payload
		require.NoError(t, json.Unmarshal(h.Body, &p))
		require.Equal(t, alert.KindRunFailed, p.Type)
		require.Equal(t, "report", p.Data.JobName)
		require.Equal(t, "node-1", p.Data.Node)
	}
	require.Equal(t, []int{500, 500, 200}, []int{hooks[0].Status, hooks[1].Status, hooks[2].Status})
	evs := b.waitEvents(1)
	d := evs[0].Deliveries[0]
	require.Equal(t, store.DeliverySent, d.Status)
	require.Equal(t, 3, d.Attempts)
}

// TestStopLetsTheSendInFlightFinish: a graceful stop that begins while a
// webhook is answering does not cut the attempt off (recorded as failed,
// then sent again): the answer is awaited and the delivery recorded sent.
func TestStopLetsTheSendInFlightFinish(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if got.Add(1) == 1 {
			close(arrived)
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	b := newBundle(t)
	svc := b.service(b.store, nil)
	b.putSettings(svc, alert.Settings{Webhooks: []alert.Webhook{{Name: "ops", URL: srv.URL}}})
	job := b.job("slow-receiver")
	require.NoError(t, svc.Raise(t.Context(), alert.Event{Kind: alert.KindRunFailed, Key: "run.failed:stop-1",
		JobID: job.ID, Node: "node-1", Message: "exit status 2"}))

	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		svc.RunSender(ctx)
	}()
	select {
	case <-arrived:
	case <-time.After(waitLong):
		t.Fatal("the webhook got no request")
	}
	cancel() // the graceful stop begins while the receiver holds the answer
	close(release)
	select {
	case <-stopped:
	case <-time.After(waitLong):
		t.Fatal("the sender did not stop")
	}
	evs := b.waitEvents(1)
	d := evs[0].Deliveries[0]
	require.Equal(t, store.DeliverySent, d.Status, "last error %q", d.LastError)
	require.Equal(t, 1, d.Attempts)
	require.Equal(t, int32(1), got.Load())
}

// TestTwoLeadersRaiseOnce: an old and a new leader scanning the same runs
// and two replicas delivering raise and send each event once.
func TestTwoLeadersRaiseOnce(t *testing.T) {
	t.Parallel()
	hook := alerttest.StartWebhook(t, "plain-secret", nil)
	b := newBundle(t)
	a, c := b.service(b.store, nil), b.service(b.open(), nil)
	b.putSettings(a, alert.Settings{Webhooks: []alert.Webhook{{Name: "ops", URL: hook.URL, Secret: hook.Secret}}})
	job := b.job("twice")
	for _, s := range []*alert.Service{a, c} {
		run(t, s.RunScanner)
		run(t, s.RunSender)
	}
	for range 5 {
		b.result(job, "n1", cluster.StatusFailed, 1, "")
		b.result(job, "n1", cluster.StatusSuccess, 0, "")
	}
	evs := b.waitEvents(10)
	b.waitDelivered()
	keys := map[string]int{}
	for _, ev := range evs {
		keys[ev.DedupeKey]++
	}
	require.Len(t, keys, 10)
	ids := map[string]int{}
	for _, h := range hook.Hooks() {
		require.True(t, h.SignatureOK)
		ids[h.ID]++
	}
	for id, n := range ids {
		require.Equal(t, 1, n, "webhook %s delivered %d times", id, n)
	}
}

// TestScheduleMissedAndNoLeader: a fire recorded as failed without ever
// being dispatched (no live node) raises schedule.missed; a replica that
// sees no leader raises cluster.no_leader once.
func TestScheduleMissedAndNoLeader(t *testing.T) {
	t.Parallel()
	hook := alerttest.StartWebhook(t, "s", nil)
	b := newBundle(t)
	svc := b.service(b.store, nil)
	b.putSettings(svc, alert.Settings{Webhooks: []alert.Webhook{{Name: "ops", URL: hook.URL, Secret: "s"}},
		NoLeaderAfter: alert.Duration(200 * time.Millisecond)})
	job := b.job("orphan")
	run(t, svc.RunScanner)
	run(t, svc.RunSender)
	run(t, func(ctx context.Context) { svc.WatchLeader(ctx, noLeader{}, 50*time.Millisecond, "s1") })

	b.result(job, "", cluster.StatusFailed, 0, "")
	kinds := func(h []alerttest.Hook) map[string]int {
		out := map[string]int{}
		for _, x := range h {
			var p alert.Payload
			require.NoError(t, json.Unmarshal(x.Body, &p))
			out[p.Type]++
		}
		return out
	}
	hook.WaitFor(t, waitLong, "schedule.missed and cluster.no_leader", func(h []alerttest.Hook) bool {
		k := kinds(h)
		return k[alert.KindScheduleMissed] == 1 && k[alert.KindClusterNoLeader] == 1
	})
	b.waitDelivered()
	k := kinds(hook.Hooks())
	require.Equal(t, map[string]int{alert.KindScheduleMissed: 1, alert.KindClusterNoLeader: 1}, k)
}

type noLeader struct{}

func (noLeader) LeaderID() string { return "" }
func (noLeader) Term() uint64     { return 0 }

// TestSettingsSecretsAreWriteOnly: secrets survive a write that leaves
// them empty and never appear in the redacted settings; bad input is
// refused field by field and changes nothing.
func TestSettingsSecretsAreWriteOnly(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	svc := b.service(b.store, nil)
	b.putSettings(svc, alert.Settings{
		SMTP:     alert.SMTP{Host: "mail.example.com", Username: "u", Password: "pw-1", From: "c@example.com"},
		Webhooks: []alert.Webhook{{Name: "ops", URL: "https://hooks.example.com/x", Secret: "sec-1"}},
	})
	got, err := svc.Settings(t.Context())
	require.NoError(t, err)
	red := got.Redacted()
	b.putSettings(svc, red) // written back as read
	got, err = svc.Settings(t.Context())
	require.NoError(t, err)
	require.Equal(t, "pw-1", got.SMTP.Password)
	require.Equal(t, "sec-1", got.Webhooks[0].Secret)
	raw, err := json.Marshal(got.Redacted())
	require.NoError(t, err)
	require.NotContains(t, string(raw), "pw-1")
	require.NotContains(t, string(raw), "sec-1")

	_, err = svc.PutSettings(t.Context(), alert.Settings{
		SMTP:     alert.SMTP{Host: "x", From: "not-an-address", Security: "ssl"},
		Webhooks: []alert.Webhook{{Name: "a b", URL: "ftp://x"}},
	}, "admin")
	var fe alert.FieldErrors
	require.ErrorAs(t, err, &fe)
	require.Contains(t, fe, "smtp.from")
	require.Contains(t, fe, "smtp.security")
	require.Contains(t, fe, "webhooks[0].name")
	require.Contains(t, fe, "webhooks[0].url")
	after, err := svc.Settings(t.Context())
	require.NoError(t, err)
	require.Equal(t, got, after, "a refused write changes nothing")
}

// hangingStore is the real store, except that while hang is set its
// InsertAlertEvent blocks until its context ends. It stands in for a
// database call that never returns (this process's SQLite writers queued
// behind a transaction that does not end, a connection pool never freed),
// which a test cannot cause through the store's own API.
type hangingStore struct {
	alert.Store
	hang atomic.Bool
}

func (h *hangingStore) InsertAlertEvent(ctx context.Context, ev *store.AlertEvent, d []store.AlertDelivery) (bool, error) {
	if h.hang.Load() {
		<-ctx.Done()
		return false, fmt.Errorf("hanging store: %w", ctx.Err())
	}
	return h.Store.InsertAlertEvent(ctx, ev, d)
}

// TestNoLeaderWatchOutlastsAHungDatabase: while the store hangs, the
// watch's raise gives up after WatchCallTimeout and says so in the log;
// once the store answers again, the next check raises cluster.no_leader.
func TestNoLeaderWatchOutlastsAHungDatabase(t *testing.T) {
	t.Parallel()
	hook := alerttest.StartWebhook(t, "s", nil)
	b := newBundle(t)
	var logs syncbuf.Buffer
	st := &hangingStore{Store: b.store}
	st.hang.Store(true)
	svc := b.service(b.store, func(c *alert.Config) {
		c.Store = st
		c.WatchCallTimeout = 300 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	b.putSettings(svc, alert.Settings{Webhooks: []alert.Webhook{{Name: "ops", URL: hook.URL, Secret: "s"}},
		NoLeaderAfter: alert.Duration(100 * time.Millisecond)})

	run(t, func(ctx context.Context) { svc.WatchLeader(ctx, noLeader{}, 50*time.Millisecond, "s1") })
	require.Eventually(t, func() bool {
		return strings.Count(logs.String(), "no-leader watch: raising the alert failed; retrying") >= 2
	}, waitLong, 20*time.Millisecond, "each hung raise ends and is logged")
	require.Contains(t, logs.String(), "context deadline exceeded")
	require.NotContains(t, logs.String(), "no raft leader; alert raised")

	st.hang.Store(false)
	run(t, svc.RunSender)
	hook.WaitFor(t, waitLong, "cluster.no_leader once the store answers", func(h []alerttest.Hook) bool {
		for _, x := range h {
			var p alert.Payload
			require.NoError(t, json.Unmarshal(x.Body, &p))
			if p.Type == alert.KindClusterNoLeader {
				return true
			}
		}
		return false
	})
	require.Contains(t, logs.String(), "no raft leader; alert raised")
}
