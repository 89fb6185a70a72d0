package store_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/report"
	"github.com/cronix/cronix/server/store"
)

// countingStore is the real store, counting the retention batches it is
// asked for and the rows each one touched.
type countingStore struct {
	*store.Store
	mu      sync.Mutex
	deletes []int
	clears  []int
	// runs returned by ReportRunsPage and ReportRunsAfterID
	keysetRead, newRead int
}

func (c *countingStore) DeleteRunsBefore(ctx context.Context, cutoff time.Time, after store.RunKey, limit int) (int, int, store.RunKey, error) {
	read, n, next, err := c.Store.DeleteRunsBefore(ctx, cutoff, after, limit)
	c.mu.Lock()
	c.deletes = append(c.deletes, n)
	c.mu.Unlock()
	return read, n, next, err
}

func (c *countingStore) ClearOutputBefore(ctx context.Context, cutoff time.Time, after store.RunKey, limit int) (int, int, store.RunKey, error) {
	read, n, next, err := c.Store.ClearOutputBefore(ctx, cutoff, after, limit)
	c.mu.Lock()
	c.clears = append(c.clears, n)
	c.mu.Unlock()
	return read, n, next, err
}

// ReportRunsPage counts the runs a full read returns.
func (c *countingStore) ReportRunsPage(ctx context.Context, after store.RunKey, to time.Time, limit int) ([]store.ReportRun, error) {
	runs, err := c.Store.ReportRunsPage(ctx, after, to, limit)
	c.mu.Lock()
	c.keysetRead += len(runs)
	c.mu.Unlock()
	return runs, err
}

// ReportRunsAfterID counts the new runs a pass reads.
func (c *countingStore) ReportRunsAfterID(ctx context.Context, after int64, limit int) ([]store.ReportRun, error) {
	runs, err := c.Store.ReportRunsAfterID(ctx, after, limit)
	c.mu.Lock()
	c.newRead += len(runs)
	c.mu.Unlock()
	return runs, err
}

// reads returns and resets the runs read in full and as new.
func (c *countingStore) reads() (keyset, fresh int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keyset, fresh = c.keysetRead, c.newRead
	c.keysetRead, c.newRead = 0, 0
	return keyset, fresh
}

// nearestRank is the exact nearest-rank quantile of vals.
func nearestRank(vals []int64, p float64) int64 {
	if len(vals) == 0 {
		return 0
	}
	s := append([]int64(nil), vals...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[report.Rank(p, int64(len(s)))-1]
}

// runReportSuite covers the daily report and retention; runSuite calls it
// on every dialect.
func runReportSuite(t *testing.T, open func(t *testing.T) *store.Store) {
	t.Run("DailyReportEqualsDirectCount", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		s := open(t)
		day := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
		jobs := make([]*store.Job, 3)
		for i := range jobs {
			group := "billing"
			if i == 2 {
				group = "ops"
			}
			jobs[i] = &store.Job{Name: fmt.Sprintf("job-%d", i), Group: group, ScheduleType: "cron", Schedule: "* * * * *",
				Handler: "shell", Enabled: true}
			require.NoError(t, s.CreateJob(ctx, jobs[i]))
		}
		statuses := []string{cluster.StatusSuccess, cluster.StatusSuccess, cluster.StatusFailed, cluster.StatusTimeout,
			cluster.StatusKilled, cluster.StatusLost, cluster.StatusSkipped, cluster.StatusSuccess}
		lateness := map[int64][]int64{}
		duration := map[int64][]int64{}
		var results []cluster.RunResult
		var triggered []store.Run
		for i := range 240 {
			j := jobs[i%3]
			// Spread over the day, with runs at its first and last microsecond.
			at := day.Add(time.Duration(i) * 6 * time.Minute)
			if i == 239 {
				at = day.Add(24*time.Hour - time.Microsecond)
			}
			if i%37 == 36 {
				triggered = append(triggered, store.Run{FireID: cluster.FireID(j.ID, at), JobID: j.ID,
					Trigger: cluster.TriggerSchedule, Status: cluster.StatusTriggered, ScheduledAt: at})
				continue
			}
			st := statuses[i%len(statuses)]
			trig := cluster.TriggerSchedule
			if i%11 == 0 {
				trig = cluster.TriggerManual
			}
			r := cluster.RunResult{FireID: cluster.FireID(j.ID, at), JobID: j.ID, Trigger: trig, Node: "n1",
				Status: st, ScheduledAt: at}
			if st != cluster.StatusSkipped && st != cluster.StatusLost {
				late := time.Duration((i*37)%900+1) * time.Millisecond
				dur := time.Duration((i*53)%700) * time.Millisecond
				started, finished := at.Add(late), at.Add(late+dur)
				r.StartedAt, r.FinishedAt = &started, &finished
				if trig == cluster.TriggerSchedule {
					lateness[j.ID] = append(lateness[j.ID], late.Milliseconds())
				}
				duration[j.ID] = append(duration[j.ID], dur.Milliseconds())
			}
			results = append(results, r)
		}
		// Neighbours of the day, not counted in it.
		for _, at := range []time.Time{day.Add(-time.Microsecond), day.Add(24 * time.Hour)} {
			results = append(results, cluster.RunResult{FireID: cluster.FireID(jobs[0].ID, at), JobID: jobs[0].ID,
				Trigger: cluster.TriggerSchedule, Node: "n1", Status: cluster.StatusFailed, ScheduledAt: at})
		}
		require.NoError(t, s.ApplyResults(ctx, results))
		_, err := s.InsertRuns(ctx, triggered)
		require.NoError(t, err)

		svc, err := report.New(report.Config{Store: s, Now: func() time.Time { return day.Add(50 * time.Hour) },
			PageSize: 7, MaxDaysPerPass: 30})
		require.NoError(t, err)
		open, err := svc.Report(ctx)
		require.NoError(t, err)
		require.Equal(t, day.AddDate(0, 0, 2), open, "days ended over Settle ago are final; today stays open")

		rows, total, err := s.FindDailyReports(ctx, store.DailyReportFilter{From: "2026-03-10", To: "2026-03-10"},
			store.Page{Page: 1, PageSize: 100})
		require.NoError(t, err)
		require.Equal(t, 3, total)
		direct, err := s.CountRunsByJobStatus(ctx, day, day.AddDate(0, 0, 1))
		require.NoError(t, err)
		require.Len(t, direct, 3)
		for _, r := range rows {
			want := direct[r.JobID]
			sum := 0
			for _, n := range want {
				sum += n
			}
			got := map[string]int{}
			for st, n := range map[string]int{cluster.StatusSuccess: r.Success, cluster.StatusFailed: r.Failed,
				cluster.StatusTimeout: r.Timeout, cluster.StatusKilled: r.Killed, cluster.StatusLost: r.Lost,
				cluster.StatusSkipped: r.Skipped, cluster.StatusTriggered: r.Unfinished} {
				if n > 0 {
					got[st] = n
				}
			}
			require.Equal(t, want, got, "job %d by status", r.JobID)
			require.Equal(t, sum, r.Total, "job %d total", r.JobID)
			require.True(t, r.Final)
			require.Equal(t, "2026-03-10", r.Day)
			// The report gives a quantile as report.Reported does a value
			// (exact below 128 ms, at most 1/64 low above).
			require.Equal(t, int64(len(lateness[r.JobID])), r.LatenessCount)
			require.Equal(t, report.Reported(nearestRank(lateness[r.JobID], 0.5)), r.LatenessP50, "job %d lateness p50", r.JobID)
			require.Equal(t, report.Reported(nearestRank(lateness[r.JobID], 0.99)), r.LatenessP99, "job %d lateness p99", r.JobID)
			require.Equal(t, int64(len(duration[r.JobID])), r.DurationCount)
			require.Equal(t, report.Reported(nearestRank(duration[r.JobID], 0.5)), r.DurationP50, "job %d duration p50", r.JobID)
			require.Equal(t, report.Reported(nearestRank(duration[r.JobID], 0.99)), r.DurationP99, "job %d duration p99", r.JobID)
		}
		require.Equal(t, "billing", rows[0].Group)
		require.Equal(t, "ops", rows[2].Group)

		// The day before holds only the neighbour run.
		prev, _, err := s.FindDailyReports(ctx, store.DailyReportFilter{From: "2026-03-09", To: "2026-03-09"}, store.Page{})
		require.NoError(t, err)
		require.Len(t, prev, 1)
		require.Equal(t, 1, prev[0].Failed)

		// Group filter and scope.
		ops, _, err := s.FindDailyReports(ctx, store.DailyReportFilter{Group: "ops"}, store.Page{})
		require.NoError(t, err)
		require.Len(t, ops, 1)
		require.Equal(t, jobs[2].ID, ops[0].JobID)
		none, _, err := s.FindDailyReports(ctx, store.DailyReportFilter{Scope: &store.Scope{}}, store.Page{})
		require.NoError(t, err)
		require.Empty(t, none)

		// A second pass recomputes only open days: the final ones stay.
		_, _, _, err = s.DeleteRunsBefore(ctx, day.AddDate(0, 0, 1), store.RunKey{}, 1000)
		require.NoError(t, err)
		_, err = svc.Report(ctx)
		require.NoError(t, err)
		again, _, err := s.FindDailyReports(ctx, store.DailyReportFilter{From: "2026-03-10", To: "2026-03-10"}, store.Page{})
		require.NoError(t, err)
		require.Len(t, again, 3)
		require.Equal(t, rows[0].Total, again[0].Total)
	})

	t.Run("OpenDayReadsOnlyNewRunsAndMatchesAFullRead", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		base := open(t)
		s := &countingStore{Store: base}
		day := time.Date(2026, 4, 20, 0, 0, 0, 0, time.UTC)
		now := day.Add(12 * time.Hour)
		clock := func() time.Time { return now }
		jobs := make([]int64, 3)
		for i := range jobs {
			j := &store.Job{Name: fmt.Sprintf("live-%d", i), Group: "default", ScheduleType: "cron", Schedule: "* * * * *",
				Handler: "shell", Enabled: true}
			require.NoError(t, base.CreateJob(ctx, j))
			jobs[i] = j.ID
		}
		// runs adds n runs of each job scheduled from at on, one a second:
		// every third one left triggered (its fire id returned), the others
		// finished with a lateness and a duration of their own.
		seq := 0
		runs := func(at time.Time, n int) (triggered []cluster.RunResult) {
			var results []cluster.RunResult
			var insert []store.Run
			for i := range n {
				for _, job := range jobs {
					seq++
					at := at.Add(time.Duration(i) * time.Second)
					r := cluster.RunResult{FireID: cluster.FireID(job, at), JobID: job, Trigger: cluster.TriggerSchedule,
						Node: "n1", Status: []string{cluster.StatusSuccess, cluster.StatusFailed}[seq%2], ScheduledAt: at}
					started, finished := at.Add(time.Duration(seq%700)*time.Millisecond), at.Add(time.Duration(seq%700+seq%300)*time.Millisecond)
					r.StartedAt, r.FinishedAt = &started, &finished
					if seq%3 == 0 {
						insert = append(insert, store.Run{FireID: r.FireID, JobID: job, Trigger: cluster.TriggerSchedule,
							Status: cluster.StatusTriggered, ScheduledAt: at})
						triggered = append(triggered, r)
						continue
					}
					results = append(results, r)
				}
			}
			_, err := base.InsertRuns(ctx, insert)
			require.NoError(t, err)
			require.NoError(t, base.ApplyResults(ctx, results))
			return triggered
		}
		inc, err := report.New(report.Config{Store: s, Now: clock, PageSize: 7})
		require.NoError(t, err)
		// reportOf runs a pass of svc and returns day's rows.
		reportOf := func(svc *report.Service, day time.Time) []store.DailyReport {
			_, err := svc.Report(ctx)
			require.NoError(t, err)
			rows, _, err := base.FindDailyReports(ctx, store.DailyReportFilter{From: day.Format(store.DayLayout),
				To: day.Format(store.DayLayout)}, store.Page{Page: 1, PageSize: 100})
			require.NoError(t, err)
			for i := range rows {
				rows[i].UpdatedAt = time.Time{}
			}
			return rows
		}
		// matches checks that the state kept by inc gives what a fresh
		// service's full read of the runs gives.
		matches := func(day time.Time, round string) {
			got := reportOf(inc, day)
			fresh, err := report.New(report.Config{Store: base, Now: clock, PageSize: 7})
			require.NoError(t, err)
			want := reportOf(fresh, day)
			require.Len(t, want, len(jobs), round)
			require.Equal(t, want, got, round)
		}

		pending := runs(day.Add(2*time.Hour), 20)
		runs(day.Add(-time.Hour), 2) // the day before: final, never in today's rows
		matches(day, "first pass: every run read")
		keyset, _ := s.reads()
		require.Positive(t, keyset)

		for round := range 3 {
			// Some pending runs finish, new runs come, and a late one is
			// inserted early in the day (a misfire) and one for tomorrow.
			require.NoError(t, base.ApplyResults(ctx, pending[:4]))
			pending = append(pending[4:], runs(day.Add(time.Duration(3+round)*time.Hour), 5)...)
			pending = append(pending, runs(day.Add(time.Duration(30+round)*time.Minute), 1)...)
			runs(day.Add(time.Duration(24*60+round)*time.Minute), 1)
			matches(day, fmt.Sprintf("round %d", round))
			keyset, fresh := s.reads()
			require.Zero(t, keyset, "round %d: no full read of an open day", round)
			require.LessOrEqual(t, fresh, 2*7*len(jobs), "round %d: only the runs of the last two passes are read", round)
		}

		// Tomorrow, today is final (read in full once) and tomorrow open.
		require.NoError(t, base.ApplyResults(ctx, pending))
		now = day.Add(36 * time.Hour)
		matches(day.AddDate(0, 0, 1), "tomorrow")
		final := reportOf(inc, day)
		require.True(t, final[0].Final)
		total := 0
		for _, r := range final {
			total += r.Total
			require.Zero(t, r.Unfinished)
		}
		require.Equal(t, (20+3*5+3)*len(jobs), total)
	})

	t.Run("RetentionDeletesOnlyOlderInBatches", func(t *testing.T) {
		t.Parallel()
		ctx := testCtx(t)
		base := open(t)
		s := &countingStore{Store: base}
		now := time.Now().UTC().Truncate(time.Second)
		job := &store.Job{Name: "retained", Group: "default", ScheduleType: "cron", Schedule: "* * * * *", Handler: "shell"}
		require.NoError(t, base.CreateJob(ctx, job))
		var results []cluster.RunResult
		add := func(at time.Time, n int) {
			for i := range n {
				at := at.Add(time.Duration(i) * time.Second)
				results = append(results, cluster.RunResult{FireID: cluster.FireID(job.ID, at), JobID: job.ID,
					Trigger: cluster.TriggerSchedule, Node: "n1", Status: cluster.StatusSuccess, ScheduledAt: at,
					Output: "some output"})
			}
		}
		add(now.Add(-10*24*time.Hour), 7) // older than the run retention
		add(now.Add(-3*24*time.Hour), 5)  // older than the output retention only
		add(now.Add(-time.Hour), 4)       // recent
		require.NoError(t, base.ApplyResults(ctx, results))
		oldAt := now.Add(-9 * 24 * time.Hour)
		_, err := base.InsertRuns(ctx, []store.Run{{FireID: cluster.FireID(job.ID, oldAt), JobID: job.ID,
			Trigger: cluster.TriggerSchedule, Status: cluster.StatusTriggered, ScheduledAt: oldAt}})
		require.NoError(t, err)

		svc, err := report.New(report.Config{Store: s, Now: func() time.Time { return now },
			RunRetention: 5 * 24 * time.Hour, OutputRetention: 2 * 24 * time.Hour,
			RetentionBatch: 2, RetentionPause: time.Millisecond})
		require.NoError(t, err)

		// Reports of the old days not final yet: nothing is deleted.
		require.NoError(t, svc.Retain(ctx, now.Add(-11*24*time.Hour)))
		n, err := base.CountRunsSQL(ctx, "1 = 1")
		require.NoError(t, err)
		require.Equal(t, 17, n)

		s.deletes, s.clears = nil, nil
		require.NoError(t, svc.Retain(ctx, now))
		require.Equal(t, []int{2, 2, 2, 1, 0}, s.deletes, "7 old runs deleted 2 per batch; the unfinished one read, kept and passed")
		for _, c := range s.clears {
			require.LessOrEqual(t, c, 2)
		}
		left, err := base.CountRunsSQL(ctx, "r.scheduled_at < ?", now.Add(-5*24*time.Hour))
		require.NoError(t, err)
		require.Equal(t, 1, left, "only the unfinished old run is kept")
		n, err = base.CountRunsSQL(ctx, "1 = 1")
		require.NoError(t, err)
		require.Equal(t, 10, n)
		cleared, err := base.CountRunsSQL(ctx, "r.output = ''")
		require.NoError(t, err)
		require.Equal(t, 6, cleared, "the 5 runs older than 2 days lost their output (and the triggered one has none)")
		kept, err := base.CountRunsSQL(ctx, "r.output = 'some output'")
		require.NoError(t, err)
		require.Equal(t, 4, kept, "recent runs keep their output")
	})
}
