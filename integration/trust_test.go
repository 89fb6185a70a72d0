package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cronix/cronix/cluster"
)

// Run keys written straight into etcd (unsigned, signed with another key, a
// valid record replayed under another fire id, a valid record of an older
// term) never run on a real node: no process starts (marker files), the
// node logs each refusal and the API lists them as security events. A
// correctly signed record of the current term runs (the control).
func TestForgedRunKeysAreNeverExecuted(t *testing.T) {
	dataDir := t.TempDir()
	s := startStandalone(t, dataDir, nil)
	token := nodeToken(t, dataDir)
	node, uuid := startNode(t, s, token, t.TempDir(), "trust")

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.etcdURL}, DialTimeout: 5 * time.Second,
		Username: "root", Password: etcdPassword(t, dataDir), Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	keys := cluster.NewKeys("")

	resp, err := cli.Get(ctx, keys.Leader())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "the standalone's trigger leader claimed the leader key")
	term, _, err := cluster.ParseLeaderValue(string(resp.Kvs[0].Value))
	require.NoError(t, err)
	require.Positive(t, term)

	ring, err := cluster.KeyringFromTokens(token)
	require.NoError(t, err)
	other, err := cluster.KeyringFromTokens("an-attacker-guess")
	require.NoError(t, err)
	markers := t.TempDir()
	marker := func(fire string) string { return filepath.Join(markers, fire) }
	body := func(fire string, term uint64) []byte {
		jobID, err := cluster.JobIDOfFire(fire)
		require.NoError(t, err)
		params, err := json.Marshal(map[string]string{"script": "touch " + marker(fire)})
		require.NoError(t, err)
		b, err := json.Marshal(cluster.Dispatch{FireID: fire, Trigger: cluster.TriggerSchedule,
			ScheduledAt: time.Now().UTC(), DispatchedAt: time.Now().UTC(), Term: term,
			Job: cluster.JobConfig{JobID: jobID, Name: "forged", Group: "trust", Handler: "shell", Params: params}})
		require.NoError(t, err)
		return b
	}
	put := func(fire string, value []byte) {
		t.Helper()
		_, err := cli.Put(ctx, keys.Run(uuid, fire), string(value))
		require.NoError(t, err)
	}
	seal := func(r *cluster.Keyring, keyFire, bodyFire string, term uint64) []byte {
		t.Helper()
		v, err := r.Seal(keys.Run(uuid, keyFire), term, body(bodyFire, term))
		require.NoError(t, err)
		return v
	}

	put("900-1", body("900-1", term))                        // unsigned
	put("900-2", seal(other, "900-2", "900-2", term))        // another key
	put("900-4", []byte(seal(ring, "900-3", "900-3", term))) // valid for 900-3, replayed as 900-4
	put("900-5", seal(ring, "900-5", "900-5", term-1))       // valid, of an older term
	put("900-6", seal(ring, "900-6", "900-6", term))         // the control: runs

	require.Eventually(t, func() bool { _, err := os.Stat(marker("900-6")); return err == nil },
		60*time.Second, 100*time.Millisecond, "the correctly signed record runs")

	var events struct {
		Items []struct {
			Node string `json:"node"`
			Kind string `json:"kind"`
			Key  string `json:"key"`
		} `json:"items"`
	}
	want := map[string]string{
		keys.Run(uuid, "900-1"): "unsigned_record",
		keys.Run(uuid, "900-2"): "bad_signature",
		keys.Run(uuid, "900-4"): "bad_signature",
		keys.Run(uuid, "900-5"): "stale_term",
	}
	got := map[string]string{}
	require.Eventually(t, func() bool {
		status, err := s.api.Do("GET", "/api/v1/security/events?page_size=100", nil, &events)
		if err != nil || status != 200 {
			return false
		}
		for _, e := range events.Items {
			if _, ok := want[e.Key]; ok && e.Node == uuid {
				got[e.Key] = e.Kind
			}
		}
		return len(got) == len(want)
	}, 60*time.Second, 200*time.Millisecond, "every refusal is a security event")
	require.Equal(t, want, got)

	for _, fire := range []string{"900-1", "900-2", "900-3", "900-4", "900-5"} {
		_, err := os.Stat(marker(fire))
		require.True(t, os.IsNotExist(err), "forged fire %s started no process", fire)
		r, err := cli.Get(ctx, keys.Run(uuid, fire), clientv3.WithCountOnly())
		require.NoError(t, err)
		require.Zero(t, r.Count, "refused record %s is deleted", fire)
	}
	for fire := range want {
		require.Contains(t, node.Output(), fmt.Sprintf("key=%s", fire), "the node logs the refusal of %s", fire)
	}
}
