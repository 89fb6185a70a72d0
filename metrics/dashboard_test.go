package metrics

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestGrafanaDashboardQueriesRealMetrics: every cronix_* series the
// dashboard in docs/grafana queries is a family of the registry (after one
// recording of each), so a renamed metric breaks this test, not the
// dashboard in production.
func TestGrafanaDashboardQueriesRealMetrics(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docs/grafana/cronix.json")
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.NotEmpty(t, dash.Panels)

	m := New()
	require.NoError(t, m.RegisterRaft(fakeRaft{}))
	require.NoError(t, m.RegisterNodes(func(context.Context) (map[string]int, error) {
		return map[string]int{"online": 1}, nil
	}))
	m.ObserveLateness(StageDispatched, time.Millisecond)
	m.Fired(FireDispatched, 1)
	m.ObserveDispatch(1, time.Millisecond)
	m.RunStarted("shell")
	m.RunFinished("shell", "success")
	m.ObserveSQL("SELECT", time.Millisecond)
	m.PluginStarted("shell")
	m.AlertSent(ChannelEmail, OutcomeSent)
	m.etcdSeconds.WithLabelValues("KV/Range").Observe(0.001)
	fams, err := m.reg.Gather()
	require.NoError(t, err)
	have := map[string]bool{}
	for _, f := range fams {
		have[f.GetName()] = true
	}

	name := regexp.MustCompile(`cronix_[a-z_]+`)
	queried := 0
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			for _, series := range name.FindAllString(tg.Expr, -1) {
				fam := series
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if trimmed, ok := strings.CutSuffix(series, suffix); ok && have[trimmed] {
						fam = trimmed
					}
				}
				require.True(t, have[fam], "panel %q queries %s, which no metric family provides", p.Title, series)
				queried++
			}
		}
	}
	// Every Cronix family appears on the dashboard.
	for f := range have {
		if strings.HasPrefix(f, "cronix_") {
			require.Contains(t, string(raw), f, "family %s is not on the dashboard", f)
		}
	}
	require.Positive(t, queried)
}
