package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cronix/cronix/server/store"
)

// missedReport says where a row's missed fires went: which seconds lack
// executions, what the SQL record holds for those fires (no run at all:
// never dispatched, e.g. collapsed by a misfire policy; or a run and its
// status: dispatched but not executed, or executed without reaching the
// bench), and the standalone's warnings and errors. A row with missed fires
// is then explained in its own output, not only in a --keep'd data dir.
type missedReport struct {
	// Seconds are the scheduled seconds with missing fires, as ranges
	// "hh:mm:ss–hh:mm:ss ×n" (n missing fires in the range).
	Seconds []string
	// InSQL counts the missing fires by what the runs table holds for them:
	// "no run" or "<status>: <message>".
	InSQL map[string]int
	// Log is the standalone's WARN and ERROR lines (the last 20).
	Log []string
	// SamplerGap is the longest wall-clock gap between two of the bench's
	// 1-s usage samples over the window: well above 1 s, the bench process
	// itself was held (the whole machine paused, e.g. by its host), not
	// only Cronix.
	SamplerGap time.Duration
}

// explainMissed builds the report for jobs over [start, end) from the
// samples the row tallied; the standalone must be stopped (its SQLite file
// is read).
func explainMissed(ctx context.Context, s *standalone, samples []sample, usage []usageSample, jobs []int64, start, end time.Time) (missedReport, error) {
	var rep missedReport
	var prev time.Time
	for _, u := range usage {
		if u.At.Before(start.Add(-time.Second)) || u.At.After(end.Add(time.Second)) {
			continue
		}
		if !prev.IsZero() {
			rep.SamplerGap = max(rep.SamplerGap, u.At.Sub(prev))
		}
		prev = u.At
	}
	type key struct {
		job int64
		sec int64
	}
	seen := map[key]bool{}
	for _, x := range samples {
		seen[key{x.Job, x.Scheduled.Unix()}] = true
	}
	missing := map[key]bool{}
	perSec := map[int64]int{}
	for sec := start.Unix(); sec < end.Unix(); sec++ {
		for _, j := range jobs {
			if k := (key{j, sec}); !seen[k] {
				missing[k] = true
				perSec[sec]++
			}
		}
	}
	secs := make([]int64, 0, len(perSec))
	for sec := range perSec {
		secs = append(secs, sec)
	}
	slices.Sort(secs)
	hhmmss := func(sec int64) string { return time.Unix(sec, 0).UTC().Format(time.TimeOnly) }
	for i := 0; i < len(secs); {
		j, n := i, perSec[secs[i]]
		for j+1 < len(secs) && secs[j+1] == secs[j]+1 {
			j++
			n += perSec[secs[j]]
		}
		rep.Seconds = append(rep.Seconds, fmt.Sprintf("%s–%s ×%d", hhmmss(secs[i]), hhmmss(secs[j]), n))
		i = j + 1
	}

	st, err := store.Open(ctx, "sqlite://"+filepath.Join(s.dataDir, "cronix.db"))
	if err != nil {
		return rep, fmt.Errorf("opening the SQLite store: %w", err)
	}
	defer st.Close()
	rep.InSQL = map[string]int{}
	found := map[key]bool{}
	for _, j := range jobs {
		rs, _, err := st.FindRuns(ctx, store.RunFilter{JobID: j, From: start, To: end}, store.Page{Page: 1, PageSize: 4 * int(end.Sub(start)/time.Second)})
		if err != nil {
			return rep, fmt.Errorf("runs of job %d: %w", j, err)
		}
		for _, r := range rs {
			k := key{r.JobID, r.ScheduledAt.Unix()}
			if !missing[k] {
				continue
			}
			found[k] = true
			rep.InSQL[r.Status+": "+firstLine(r.Message)]++
		}
	}
	if n := len(missing) - len(found); n > 0 {
		rep.InSQL["no run"] = n
	}
	for _, line := range strings.Split(s.p.Output(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			rep.Log = append(rep.Log, line)
		}
	}
	if len(rep.Log) > 20 {
		rep.Log = rep.Log[len(rep.Log)-20:]
	}
	return rep, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}

// note is the report in one line for the row's notes.
func (m missedReport) note() string {
	keys := make([]string, 0, len(m.InSQL))
	for k := range m.InSQL {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m.InSQL[k]))
	}
	return fmt.Sprintf("missed fires at %s (UTC); in SQL: %s; the standalone logged %d warnings/errors; the bench's own 1-s sampler's longest gap %s",
		strings.Join(m.Seconds, ", "), strings.Join(parts, ", "), len(m.Log), sec(m.SamplerGap))
}
