package alert_test

import (
	"encoding/json"
	"testing"

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
	b.result(loud, "node-l", cluster.StatusSuccess, 0, "ok") // no job.recovered: a kill is no failure
	// A failure after them: once its alert is out, the scanner has passed
	// the runs before it (it reads in order of updated_at, id).
	failed := b.result(loud, "node-l", cluster.StatusFailed, 2, "boom")

	hooks := hook.WaitFor(t, waitLong, "run.killed and run.failed", func(h []alerttest.Hook) bool { return len(h) >= 2 })
	b.waitDelivered()
	var p alert.Payload
	require.NoError(t, json.Unmarshal(hooks[0].Body, &p))
	require.Equal(t, alert.KindRunKilled, p.Type)
	require.Equal(t, "loud", p.Data.JobName)
	require.Equal(t, "node-l", p.Data.Node)

	evs, total, err := b.store.FindAlertEvents(t.Context(), store.AlertEventFilter{}, store.Page{Page: 1, PageSize: 10})
	require.NoError(t, err)
	require.Equal(t, 2, total, "%+v", evs)
	keys := []string{evs[0].DedupeKey, evs[1].DedupeKey}
	require.ElementsMatch(t, []string{"run.killed:" + fire, "run.failed:" + failed}, keys)
	require.Len(t, hook.Hooks(), 2)
	require.False(t, evs[0].Suppressed || evs[1].Suppressed, "a kill opens no failure episode")
}
