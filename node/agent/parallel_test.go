package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
)

// TestLargeBatchKeepsPerJobOrder: a watch response with many fires is
// accepted by several goroutines, but the fires of one job still run once
// each and in dispatch order (SERIAL_EXECUTION), and each is journalled
// then closed in the start journal.
func TestLargeBatchKeepsPerJobOrder(t *testing.T) {
	t.Parallel()
	spoolDir := t.TempDir()
	b := setup(t, func(c *Config) { c.SpoolDir = spoolDir })
	b.start(t)

	const jobs, perJob = 12, 10
	var ops []clientv3.Op
	var order [jobs][]string
	for i := range perJob {
		for j := range jobs {
			// Fire ids are <job>-<unix ms>: same width, so that a listing
			// (sorted by key) has them in time order too.
			id := fmt.Sprintf("%d-%d", 100+j, 1764000000000+1000*int64(i))
			order[j] = append(order[j], id)
			key := b.cfg.Keys.Run(b.cfg.UUID, id)
			ops = append(ops, clientv3.OpPut(key, seal(t, key, dispatchValue(t, id, "echo", "", 0))))
		}
	}
	_, err := b.etcd.Txn(t.Context()).Then(ops...).Commit() // one revision: one watch response
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(b.srv.all()) >= jobs*perJob && b.runKeyCount(t) == 0 },
		waitFor, tick, "every fire reported and its run key deleted")

	for j := range jobs {
		for i, id := range order[j] {
			require.Equal(t, 1, b.runner.Calls(id), id)
			if i == 0 {
				continue
			}
			_, prev := b.runner.callInfo(order[j][i-1])
			_, cur := b.runner.callInfo(id)
			require.True(t, cur[0].After(prev[0]), "job %d: %s started before %s, dispatched before it", 100+j, id, order[j][i-1])
		}
	}
	b.agent.Stop()
	data, err := os.ReadFile(filepath.Join(spoolDir, startLogName))
	require.NoError(t, err)
	require.Equal(t, jobs*perJob, strings.Count(string(data), `"ended":true`), "an end line for every fire")
	left, err := readStartLog(filepath.Join(spoolDir, startLogName))
	require.NoError(t, err)
	require.Empty(t, left, "no fire left in progress")
}

// TestStartLogConcurrentStartsAreWrittenBeforeReturn: many fires starting
// at once are each in the file when started returns (one write(2) may
// carry several), while ends and key deletions go on; compaction keeps
// exactly the fires still running.
func TestStartLogConcurrentStartsAreWrittenBeforeReturn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, prev, err := openStartLog(dir)
	require.NoError(t, err)
	require.Empty(t, prev)
	path := filepath.Join(dir, startLogName)

	const n = 400
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		missing []string
	)
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("%d-%d", i%7+1, 1000*i)
			if err := l.started(startEntry{FireID: id, JobID: int64(i%7 + 1)}); err != nil {
				mu.Lock()
				missing = append(missing, id+": "+err.Error())
				mu.Unlock()
				return
			}
			data, err := os.ReadFile(path)
			if err != nil || !strings.Contains(string(data), `"fire_id":"`+id+`"`) {
				mu.Lock()
				missing = append(missing, id)
				mu.Unlock()
			}
			if i%2 == 0 { // half of them end, and their keys are deleted
				l.ended(id)
				if err := l.keysDeleted([]string{id}); err != nil {
					mu.Lock()
					missing = append(missing, id+": "+err.Error())
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, missing, "starts not in the file when started returned")
	l.close()
	left, err := readStartLog(path)
	require.NoError(t, err)
	require.Len(t, left, n/2, "the odd fires are still running")
	for _, e := range left {
		var i int
		_, err := fmt.Sscanf(e.FireID[strings.IndexByte(e.FireID, '-')+1:], "%d", &i)
		require.NoError(t, err)
		require.Equal(t, 1, (i/1000)%2, e.FireID)
	}

	// Compaction: a journal past startLogCompactAt is rewritten with the
	// running fires only.
	l, prev, err = openStartLog(dir)
	require.NoError(t, err)
	require.Len(t, prev, n/2)
	pad := strings.Repeat("x", 4096)
	for i := 0; l.size < startLogCompactAt/2; i++ {
		id := fmt.Sprintf("9-%d", i)
		require.NoError(t, l.started(startEntry{FireID: id, Trigger: pad}))
		l.ended(id)
		require.NoError(t, l.keysDeleted([]string{id}))
	}
	require.NoError(t, l.started(startEntry{FireID: "8-1", Trigger: "kept"}))
	for i := 0; ; i++ {
		id := fmt.Sprintf("9-x%d", i)
		before := l.size
		require.NoError(t, l.started(startEntry{FireID: id, Trigger: pad}))
		l.ended(id)
		require.NoError(t, l.keysDeleted([]string{id}))
		if l.size < before {
			break // compacted
		}
	}
	l.close()
	left, err = readStartLog(path)
	require.NoError(t, err)
	ids := make([]string, len(left))
	for i, e := range left {
		ids[i] = e.FireID
	}
	require.Equal(t, []string{"8-1"}, ids, "only the running fire is left after compaction")
}

// TestDeliveryWaitsForStartsToGoQuiet: a due delivery is held while fires
// are starting, until startQuiet passed since the last start, and never
// longer than maxDefer in all.
func TestDeliveryWaitsForStartsToGoQuiet(t *testing.T) {
	t.Parallel()
	r := &reporter{startQuiet: 20 * time.Millisecond, maxDefer: time.Second}
	t0 := time.Unix(1764000000, 0)
	require.Zero(t, r.holdFor(t0, time.Time{}), "no start yet")

	r.started(t0)
	require.Equal(t, 15*time.Millisecond, r.holdFor(t0.Add(5*time.Millisecond), time.Time{}), "a start 5 ms ago")
	require.Zero(t, r.holdFor(t0.Add(20*time.Millisecond), time.Time{}), "quiet for startQuiet")

	// Starts going on all the time: held at most maxDefer from the first hold.
	held := t0.Add(-990 * time.Millisecond)
	r.started(t0.Add(time.Millisecond))
	require.Equal(t, 5*time.Millisecond, r.holdFor(t0.Add(5*time.Millisecond), held), "capped by maxDefer")
	require.Zero(t, r.holdFor(t0.Add(10*time.Millisecond), held), "maxDefer reached")

	// A fire handed over ahead notes its StartAt: deliveries wait until
	// startQuiet after it, and an earlier start noted later keeps it.
	ahead := &reporter{startQuiet: 20 * time.Millisecond, maxDefer: time.Second}
	ahead.started(t0.Add(400 * time.Millisecond))
	ahead.started(t0)
	require.Equal(t, 420*time.Millisecond, ahead.holdFor(t0, time.Time{}), "held until startQuiet after the StartAt")
	require.Equal(t, 10*time.Millisecond, ahead.holdFor(t0.Add(410*time.Millisecond), time.Time{}))
	require.Zero(t, ahead.holdFor(t0.Add(420*time.Millisecond), time.Time{}))

	off := &reporter{}
	off.started(t0)
	require.Zero(t, off.holdFor(t0, time.Time{}), "no quiet period configured")
}

// TestStartLineIsWhatJSONWrites: the hand-built journal line is the
// json.Marshal encoding, for plain and for unusual ids.
func TestStartLineIsWhatJSONWrites(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 25, 9, 0, 1, 120000000, time.UTC)
	for _, e := range []startEntry{
		{FireID: "42-1764061201000", JobID: 42, Trigger: "schedule", ScheduledAt: at.Truncate(time.Second), StartedAt: at},
		{FireID: "42-1764061201000", Ended: true},
		{FireID: "7-1", Trigger: "manual", StartedAt: at.In(time.FixedZone("x", 3600))},
		{FireID: `odd"<id>&é`, Trigger: "a\\b", JobID: -3},
	} {
		want, err := json.Marshal(e)
		require.NoError(t, err)
		got, err := appendStartLine([]byte("prefix"), e)
		require.NoError(t, err)
		require.Equal(t, "prefix"+string(want)+"\n", string(got))
	}
}

// TestBlockStrategiesWithinOneBatch: fires of one job arriving in one
// watch response (admitted together) get their job's block strategy in
// dispatch order: DISCARD_LATER skips all but the first, COVER_EARLY keeps
// only the last queued, the others reported killed "covered by" the next.
func TestBlockStrategiesWithinOneBatch(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.start(t)
	put := func(job int, n int, strategy string) []string {
		ops := make([]clientv3.Op, n)
		ids := make([]string, n)
		for i := range ops {
			ids[i] = fmt.Sprintf("%d-%d", job, 1764000000000+1000*int64(i))
			var d cluster.Dispatch
			require.NoError(t, json.Unmarshal([]byte(dispatchValue(t, ids[i], "block", "", 0)), &d))
			d.Job.BlockStrategy = strategy
			v, err := json.Marshal(d)
			require.NoError(t, err)
			key := b.cfg.Keys.Run(b.cfg.UUID, ids[i])
			ops[i] = clientv3.OpPut(key, seal(t, key, string(v)))
		}
		_, err := b.etcd.Txn(t.Context()).Then(ops...).Commit()
		require.NoError(t, err)
		return ids
	}

	discard := put(61, 40, cluster.BlockDiscardLater)
	b.running(t, discard[0])
	for _, id := range discard[1:] {
		res := b.waitFinal(t, id)
		require.Equal(t, cluster.StatusSkipped, res.Status, id)
		require.Zero(t, res.Attempt)
		require.Contains(t, res.Message, "discarded: fire "+discard[0])
	}
	b.runner.release <- struct{}{}
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, discard[0]).Status)

	cover := put(62, 40, cluster.BlockCoverEarly)
	last := cover[len(cover)-1]
	for i, id := range cover[1 : len(cover)-1] {
		res := b.waitFinal(t, id)
		require.Equal(t, cluster.StatusKilled, res.Status, id)
		require.Equal(t, "covered by "+cover[i+2], res.Message, id)
	}
	first := b.waitFinal(t, cover[0]) // the running one, cancelled
	require.Equal(t, cluster.StatusKilled, first.Status)
	b.running(t, last)
	b.runner.release <- struct{}{}
	require.Equal(t, cluster.StatusSuccess, b.waitFinal(t, last).Status)
	for _, id := range cover[1 : len(cover)-1] {
		require.Zero(t, b.runner.Calls(id), "a covered fire never ran")
	}
}
