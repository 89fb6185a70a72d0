package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/node/trust"
)

// A run record that is unsigned, signed with another key, a valid record
// copied under another fire id, or a valid record of an older term written
// after a newer term claimed the leader key is never run: its key is
// deleted and a security event reaches the servers. Valid records run,
// also after the term changed.
func TestRefusedDispatchesAreNeverRun(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)
	ctx := t.Context()
	put := func(fireID, value string) {
		t.Helper()
		_, err := b.etcd.Put(ctx, b.cfg.Keys.Run(b.cfg.UUID, fireID), value)
		require.NoError(t, err)
	}

	b.dispatch(t, "20-1", "echo", "", 0)
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, "20-1").Status)
	validKey := b.cfg.Keys.Run(b.cfg.UUID, "20-1")
	valid := seal(t, validKey, dispatchValue(t, "20-1", "echo", "", 0))

	put("20-2", dispatchValue(t, "20-2", "echo", "", 0)) // unsigned
	other, err := cluster.KeyringFromTokens("not-the-node-token")
	require.NoError(t, err)
	forged, err := other.Seal(b.cfg.Keys.Run(b.cfg.UUID, "20-3"), testTerm, []byte(dispatchValue(t, "20-3", "echo", "", 0)))
	require.NoError(t, err)
	put("20-3", string(forged)) // another key
	put("20-4", valid)          // a valid record replayed under another fire id

	// A newer term claims the leader key; a record of the old term written
	// now is a replay, one of the new term runs.
	_, err = b.etcd.Put(ctx, b.cfg.Keys.Leader(), cluster.LeaderValue(testTerm+1, "s2"))
	require.NoError(t, err)
	put("20-5", seal(t, b.cfg.Keys.Run(b.cfg.UUID, "20-5"), dispatchValue(t, "20-5", "echo", "", 0)))
	newKey := b.cfg.Keys.Run(b.cfg.UUID, "20-6")
	body := strings.Replace(dispatchValue(t, "20-6", "echo", "", 0), `"term":1,`, `"term":2,`, 1)
	v, err := testRing.Seal(newKey, testTerm+1, []byte(body))
	require.NoError(t, err)
	put("20-6", string(v))
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, "20-6").Status, "a record of the new term runs")

	kinds := map[string]string{}
	require.Eventually(t, func() bool {
		for _, ev := range b.srv.securityEvents() {
			kinds[cluster.LastSegment(ev.Key)] = ev.Kind
		}
		return len(kinds) == 4
	}, waitFor, tick, "one security event per refused record")
	require.Equal(t, map[string]string{
		"20-2": trust.KindUnsigned, "20-3": trust.KindBadSignature,
		"20-4": trust.KindBadSignature, "20-5": trust.KindStaleTerm,
	}, kinds)
	for _, id := range []string{"20-2", "20-3", "20-4", "20-5"} {
		require.Zero(t, b.runner.Calls(id), "refused fire %s never runs", id)
		require.False(t, b.runKeyExists(t, id), "refused record %s is deleted", id)
		_, reported := b.srv.final(id)
		require.False(t, reported, "no result for refused fire %s", id)
	}
}

// An unsigned kill request, or a proc key marked killed without a
// signature, kills nothing.
func TestUnsignedKillRequestsAreRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ProcThreshold = 50 * time.Millisecond })
	b.start(t)
	b.dispatch(t, "21-1", "block", "", 0)
	key, info := b.procKeyOf(t, "21-1")
	info.Killed = true
	rawB, err := json.Marshal(info)
	raw := string(rawB)
	require.NoError(t, err)
	_, err = b.etcd.Put(t.Context(), key, raw, clientv3.WithIgnoreLease())
	require.NoError(t, err)
	_, err = b.etcd.Put(t.Context(), b.cfg.Keys.Kill(b.cfg.UUID, "21-1"), "")
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(b.srv.securityEvents()) >= 2 }, waitFor, tick,
		"both refusals reported")
	_, done := b.srv.final("21-1")
	require.False(t, done, "the fire still runs")
	b.runner.release <- struct{}{}
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, "21-1").Status)
}
