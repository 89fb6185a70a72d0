package monitor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/alert"
	"github.com/cronix/cronix/server/store"
)

// failingMark is the real store whose MarkLost fails: a leader that dies
// after raising node.down and before marking the runs.
type failingMark struct{ *store.Store }

func (failingMark) MarkLost(context.Context, []string, string) (int, error) {
	return 0, errors.New("leader crashed")
}

func nodeDownEvents(t *testing.T, db *store.Store) []store.AlertEvent {
	t.Helper()
	evs, _, err := db.FindAlertEvents(context.Background(), store.AlertEventFilter{Kind: alert.KindNodeDown},
		store.Page{Page: 1, PageSize: 100})
	require.NoError(t, err)
	return evs
}

// TestNodeDownRaisedOncePerOutage: a node whose lease is gone while it had
// runs raises one node.down (through the real alert outbox), not one per
// pass; a leader that raised it and died before marking the runs is
// followed by one that raises the same key, deduplicated; a node that comes
// back and goes down again raises a second one; a node gone without
// unfinished runs raises none.
func TestNodeDownRaisedOncePerOutage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	svc, err := alert.New(alert.Config{Store: b.db})
	require.NoError(t, err)
	lease := b.node("n1")
	b.node("idle")
	first := b.run("n1", cluster.StatusRunning)
	b.run("n1", cluster.StatusTriggered)
	_, err = b.cli.Revoke(ctx, lease)
	require.NoError(t, err)
	_, err = b.cli.Delete(ctx, b.keys.Node("idle"))
	require.NoError(t, err)

	clock := &stepClock{now: b.at}
	// The first leader raises node.down, then "crashes" before marking.
	crashed := New(Config{Store: failingMark{b.db}, Etcd: b.cli, Keys: b.keys, Clock: clock, Grace: time.Second, Alerts: svc})
	missing := map[string]time.Time{}
	_, err = crashed.pass(ctx, missing)
	require.NoError(t, err)
	require.Empty(t, nodeDownEvents(t, b.db), "raised before the grace period")
	clock.now = clock.now.Add(time.Second)
	_, err = crashed.pass(ctx, missing)
	require.ErrorContains(t, err, "leader crashed")
	evs := nodeDownEvents(t, b.db)
	require.Len(t, evs, 1)
	require.Equal(t, "node.down:n1:"+first, evs[0].DedupeKey)
	require.Equal(t, "n1", evs[0].Node)
	require.True(t, strings.Contains(evs[0].Message, "2 unfinished runs"), evs[0].Message)

	// The next leader (own memory) marks them and raises nothing new.
	next := New(Config{Store: b.db, Etcd: b.cli, Keys: b.keys, Clock: clock, Grace: time.Second, Alerts: svc})
	missing = map[string]time.Time{}
	_, err = next.pass(ctx, missing)
	require.NoError(t, err)
	clock.now = clock.now.Add(time.Second)
	n, err := next.pass(ctx, missing)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for range 3 {
		_, err = next.pass(ctx, missing)
		require.NoError(t, err)
	}
	require.Len(t, nodeDownEvents(t, b.db), 1, "one node.down per outage")
	require.Equal(t, cluster.StatusLost, b.status(first).Status)

	// Back, given a run, down again: a second outage.
	lease = b.node("n1")
	_, err = next.pass(ctx, missing)
	require.NoError(t, err)
	again := b.run("n1", cluster.StatusRunning)
	_, err = b.cli.Revoke(ctx, lease)
	require.NoError(t, err)
	_, err = next.pass(ctx, missing)
	require.NoError(t, err)
	clock.now = clock.now.Add(time.Second)
	_, err = next.pass(ctx, missing)
	require.NoError(t, err)
	evs = nodeDownEvents(t, b.db)
	require.Len(t, evs, 2)
	require.Equal(t, "node.down:n1:"+again, evs[0].DedupeKey)
	for _, ev := range evs {
		require.NotEqual(t, "idle", ev.Node, "a node without runs is not alerted")
	}
}
