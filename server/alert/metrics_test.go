package alert_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/metrics"
	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/alert/alerttest"
)

// scrape returns the value line of series in a /metrics scrape of srv.
func scrape(t *testing.T, srv *httptest.Server, series string) string {
	t.Helper()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, series+" ") {
			return line
		}
	}
	t.Fatalf("series %s not in the scrape", series)
	return ""
}

// TestDeliveryAttemptsCountedInMetrics: a webhook answering 500 once then
// 200 moves cronix_alert_sends_total{channel="webhook"} failed and sent by
// one each, as a /metrics scrape shows.
func TestDeliveryAttemptsCountedInMetrics(t *testing.T) {
	t.Parallel()
	hook := alerttest.StartWebhook(t, "plain-secret", func(n int) int {
		if n == 1 {
			return 500
		}
		return 200
	})
	m := metrics.New()
	srv := httptest.NewServer(m.Handler())
	t.Cleanup(srv.Close)
	const failed = `cronix_alert_sends_total{channel="webhook",outcome="failed"}`
	const sent = `cronix_alert_sends_total{channel="webhook",outcome="sent"}`
	require.Equal(t, failed+" 0", scrape(t, srv, failed))
	require.Equal(t, sent+" 0", scrape(t, srv, sent))

	b := newBundle(t)
	svc := b.service(b.store, func(c *alert.Config) { c.Metrics = m })
	b.putSettings(svc, alert.Settings{Webhooks: []alert.Webhook{{Name: "ops", URL: hook.URL, Secret: hook.Secret}}})
	job := b.job("metered")
	require.NoError(t, svc.Raise(t.Context(), alert.Event{Kind: alert.KindRunFailed, Key: "run.failed:metered-1",
		JobID: job.ID, Node: "node-1", Message: "exit status 2"}))
	run(t, svc.RunSender)
	b.waitDelivered()

	require.Equal(t, failed+" 1", scrape(t, srv, failed))
	require.Equal(t, sent+" 1", scrape(t, srv, sent))
	email := `cronix_alert_sends_total{channel="email",outcome="sent"}`
	require.Equal(t, email+" 0", scrape(t, srv, email))
}
