package scheduler

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
)

// A batch of jobs created together (the API signals them in one etcd
// transaction) is read with one query, placed, and fires.
func TestSignalBatchLoadedAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	h.store.putJob(job(1, everySecond))
	h.start()
	h.waitArmed(t0.Add(time.Second))
	require.Eventually(t, func() bool { return h.count(h.keys.JobRoot()) == 1 }, 10*time.Second, 5*time.Millisecond)

	const batch = 300
	ops := make([]clientv3.Op, 0, batch)
	for id := int64(2); id <= batch+1; id++ {
		h.store.putJob(job(id, everySecond))
		ops = append(ops, clientv3.OpPut(h.keys.JobSignal(id), "1"))
	}
	_, err := h.cli.Txn(context.Background()).Then(ops...).Commit()
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.count(h.keys.JobRoot()) == batch+1 }, 10*time.Second, 5*time.Millisecond)
	h.store.mu.Lock()
	loads := h.store.batchLoads
	h.store.mu.Unlock()
	require.Equal(t, 1, loads, "one read for the batch's signals")

	h.step() // t0+1: every job fires
	runs, _, dups := h.store.snapshot()
	require.Zero(t, dups)
	for id := int64(1); id <= batch+1; id++ {
		require.Contains(t, runs, cluster.FireID(id, t0.Add(time.Second)))
	}
}

// The loop keeps a slim copy of a job: shared strings and params are one
// allocation, and equal schedules are parsed once.
func TestEntriesShareWhatJobsShare(t *testing.T) {
	t.Parallel()
	l := newLoop(Config{Logger: slog.New(slog.DiscardHandler), Location: time.UTC}, 1, &seenRevs{})
	a, b := job(1, "0 0 * * * *"), job(2, "0 0 * * * *")
	b.Params = json.RawMessage(`{"cmd":"true"}`) // equal, separately allocated
	b.Group = string([]byte("g"))                // equal, separately allocated
	a.Description, a.Author, a.AlarmEmails, a.ChildJobIDs = "d", "me", []string{"ops@example.com"}, []int64{2}
	ea, eb := &entry{job: l.spec(&a), index: -1}, &entry{job: l.spec(&b), index: -1}
	require.True(t, l.parse(ea, &ea.job))
	require.True(t, l.parse(eb, &eb.job))
	require.Same(t, &ea.job.Params[0], &eb.job.Params[0], "equal params share one copy")
	require.Same(t, unsafe.StringData(ea.job.Group), unsafe.StringData(eb.job.Group), "equal groups share one copy")
	require.Same(t, ea.sched, eb.sched, "one parsed schedule for equal expressions")
	require.Equal(t, jobConfig(&ea.job), cluster.JobConfig{JobID: 1, Name: "job-1", Group: "g", Handler: "cmd",
		Params: json.RawMessage(`{"cmd":"true"}`), TimeoutSeconds: 30, Revision: 1})
	require.Equal(t, time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC), ea.sched.Next(time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC)))

	c := job(3, "not a schedule")
	cs := l.spec(&c)
	require.False(t, l.parse(&entry{index: -1}, &cs), "a bad schedule is not scheduled (nor cached)")
	require.Len(t, l.scheds, 1)
}

// A new term keeps the placements whose config did not change and
// rewrites only the changed ones; a job placed twice keeps one placement.
func TestNewTermRewritesOnlyChangedPlacements(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	const jobs = 20
	for id := int64(1); id <= jobs; id++ {
		h.store.putJob(job(id, "0 0 * * * *"))
	}
	h.start()
	h.waitArmed(t0.Add(time.Hour))
	require.Eventually(t, func() bool { return h.count(h.keys.JobRoot()) == jobs }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, h.stop())
	revs := func() map[string]int64 {
		resp, err := h.cli.Get(context.Background(), h.keys.JobRoot(), clientv3.WithPrefix())
		require.NoError(t, err)
		out := map[string]int64{}
		for _, kv := range resp.Kvs {
			out[string(kv.Key)] = kv.ModRevision
		}
		return out
	}
	before := revs()

	changed := job(5, "0 0 * * * *")
	changed.Params, changed.Revision = json.RawMessage(`{"cmd":"false"}`), 2
	h.store.putJob(changed)
	stray := h.keys.Job("n2", 7) // an old placement on a node that left
	_, err := h.cli.Put(context.Background(), stray, "{}")
	require.NoError(t, err)

	h.sched = h.newScheduler()
	h.term++
	h.start()
	h.waitArmed(t0.Add(time.Hour))
	require.Eventually(t, func() bool {
		var jc cluster.JobConfig
		err := json.Unmarshal(cluster.RecordBody(h.get(h.keys.Job("n1", 5))), &jc)
		return err == nil && jc.Revision == 2 && h.get(stray) == nil
	}, 10*time.Second, 5*time.Millisecond)
	after := revs()
	require.Len(t, after, jobs)
	for k, rev := range before {
		if k == h.keys.Job("n1", 5) {
			require.Greater(t, after[k], rev, "the changed job is placed again")
			continue
		}
		require.Equal(t, rev, after[k], "unchanged placement %s rewritten", k)
	}
}

// With placements off (the default) the leader writes none and removes
// those an earlier leader wrote; jobs still fire.
func TestPlacementsOffRemovesThem(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	h.store.putJob(job(1, everySecond))
	h.store.putJob(job(2, everySecond))
	h.start()
	h.waitArmed(t0.Add(time.Second))
	require.Eventually(t, func() bool { return h.count(h.keys.JobRoot()) == 2 }, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, h.stop())

	h.sched = New(Config{
		Jobs: h.store, Runs: h.store, Cursors: h.cursors, Dispatcher: h.disp,
		Etcd: h.cli, Keys: h.keys, Clock: h.clock, Location: time.UTC, BeatInterval: -1,
	})
	h.term++
	h.store.putJob(job(3, everySecond))
	h.start()
	h.waitArmed(t0.Add(time.Second))
	require.Eventually(t, func() bool { return h.count(h.keys.JobRoot()) == 0 }, 10*time.Second, 5*time.Millisecond)
	h.step()
	runs, _, _ := h.store.snapshot()
	for id := int64(1); id <= 3; id++ {
		require.Contains(t, runs, cluster.FireID(id, t0.Add(time.Second)))
	}
	require.Zero(t, h.count(h.keys.JobRoot()), "no placement written")
}

// The relist finds changes whose signals were missed: a changed job is
// reloaded, a new one added, a disabled or deleted one dropped.
func TestRelistAppliesMissedChanges(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.addNode("n1", "g", "cmd")
	for id := int64(1); id <= 3; id++ {
		h.store.putJob(job(id, "0 0 * * * *"))
	}
	h.start()
	require.Eventually(t, func() bool { return h.count(h.keys.JobRoot()) == 3 }, 10*time.Second, 5*time.Millisecond)

	changed := job(1, "0 0 * * * *")
	changed.Params, changed.Revision = json.RawMessage(`{"cmd":"false"}`), 2
	h.store.putJob(changed)
	off := job(2, "0 0 * * * *")
	off.Enabled, off.Revision = false, 2
	h.store.putJob(off)
	h.store.deleteJob(3)
	h.store.putJob(job(4, "0 0 * * * *"))
	manual := job(5, "")
	manual.ScheduleType = "none"
	h.store.putJob(manual)
	h.clock.Advance(DefaultRelistInterval) // no signal: only the relist sees these

	require.Eventually(t, func() bool {
		var jc cluster.JobConfig
		err := json.Unmarshal(cluster.RecordBody(h.get(h.keys.Job("n1", 1))), &jc)
		return err == nil && jc.Revision == 2 && h.get(h.keys.Job("n1", 2)) == nil &&
			h.get(h.keys.Job("n1", 3)) == nil && h.get(h.keys.Job("n1", 4)) != nil
	}, 10*time.Second, 5*time.Millisecond)
	require.Nil(t, h.get(h.keys.Job("n1", 5)), "a job without a schedule has no entry")
}
