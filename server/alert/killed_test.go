package alert_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/alert/alerttest"
	"github.com/cronix/cronix/server/store"
)

// TestRunKilledOnlyForJobsThatAskForIt: a killed run of a job with
// AlertOnKill raises one run.killed (delivered, with node and message); a
// killed run of a job without it raises nothing, and neither opens a
// failure episode.
func TestRunKilledOnlyForJobsThatAskForIt(t *testing.T) {
	t.Parallel()
	hook := alerttest.StartWebhook(t, "s", nil)
	b := newBundle(t)
	svc := b.service(b.store, nil)
	b.putSettings(svc, alert.Settings{Webhooks: []alert.Webhook{{Name: "ops", URL: hook.URL, Secret: "s"}}})
	loud := b.job("loud")
	loud.AlertOnKill = true
	require.NoError(t, b.store.UpdateJob(t.Context(), loud))
	quiet := b.job("quiet")
	run(t, svc.RunScanner)
	run(t, svc.RunSender)

	b.result(quiet, "node-q", cluster.StatusKilled, -1, "killed by admin")
	fire := b.result(loud, "node-l", cluster.StatusKilled, -1, "killed by admin")
	last := b.result(loud, "node-l", cluster.StatusSuccess, 0, "ok") // no job.recovered: a kill is no failure

	hooks := hook.WaitFor(t, waitLong, "run.killed", func(h []alerttest.Hook) bool { return len(h) >= 1 })
	b.waitDelivered()
	var p alert.Payload
	require.NoError(t, json.Unmarshal(hooks[0].Body, &p))
	require.Equal(t, alert.KindRunKilled, p.Type)
	require.Equal(t, "loud", p.Data.JobName)
	require.Equal(t, "node-l", p.Data.Node)

	// Wait until the scanner's stored cursor is past the last run, then count.
	lastRun, err := b.store.RunByFireID(t.Context(), last)
	require.NoError(t, err)
	deadline := time.Now().Add(waitLong)
	for {
		raw, err := b.store.GetSetting(t.Context(), "alert_scan_cursor")
		var c struct {
			ID int64 `json:"id"`
		}
		if err == nil && json.Unmarshal([]byte(raw), &c) == nil && c.ID >= lastRun.ID {
			break
		}
		require.True(t, time.Now().Before(deadline), "scanner cursor did not pass run %d", lastRun.ID)
		tick(50 * time.Millisecond)
	}
	evs, total, err := b.store.FindAlertEvents(t.Context(), store.AlertEventFilter{}, store.Page{Page: 1, PageSize: 10})
	require.NoError(t, err)
	require.Equal(t, 1, total, "%+v", evs)
	require.Equal(t, "run.killed:"+fire, evs[0].DedupeKey)
	require.Len(t, hook.Hooks(), 1)
}
