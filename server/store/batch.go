package store

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cronix/cronix/cluster"
)

// MaxOutputBytes caps the output stored with a run; longer output is cut
// (at a UTF-8 boundary) and the run marked OutputTruncated.
const MaxOutputBytes = 1 << 20

// maxMessageBytes caps a run's message (MySQL TEXT holds 64 KiB).
const maxMessageBytes = 32 << 10

// Batch limits of InsertRuns and ApplyResults: rows per statement, and an
// estimate of statement bytes kept well under MySQL's max_allowed_packet
// (16 MiB by default on MariaDB, 64 MiB on MySQL 8).
const (
	maxBatchRows  = 1000
	maxBatchBytes = 4 << 20
	// rowOverhead is a generous estimate of a run row's SQL text besides
	// its output and message.
	rowOverhead = 512
)

// sqliteBatchRows is maxBatchRows on a SQLite file, which has no packet
// limit: a tick's runs then fit one statement, which runs without a
// transaction (see inStatements).
const sqliteBatchRows = 10_000

// chunks splits rows into this store's statement-sized chunks: at most
// sqliteBatchRows rows on a SQLite file (whose writes go through the writer
// connection), maxBatchRows elsewhere.
func (s *Store) chunks(rows []runRow) [][]runRow {
	if s.writer != nil {
		return chunkRuns(rows, sqliteBatchRows)
	}
	return chunkRuns(rows, maxBatchRows)
}

// chunkRuns splits rows into chunks of at most maxRows rows and about
// maxBatchBytes of SQL, keeping order.
func chunkRuns(rows []runRow, maxRows int) [][]runRow {
	var (
		chunks [][]runRow
		start  int
		size   int
	)
	for i := range rows {
		n := rowOverhead + quotedLen(rows[i].Output) + quotedLen(rows[i].Message) +
			2*(len(rows[i].FireID)+len(rows[i].Node)+len(rows[i].Trigger)+len(rows[i].Status))
		if i > start && (i-start >= maxRows || size+n > maxBatchBytes) {
			chunks = append(chunks, rows[start:i])
			start, size = i, 0
		}
		size += n
	}
	return append(chunks, rows[start:])
}

// quotedLen is the length of s as a quoted SQL literal: quotes and
// backslashes may be doubled.
func quotedLen(s string) int {
	return 2 + len(s) + strings.Count(s, "'") + strings.Count(s, `\`)
}

// cleanText makes process output storable on every dialect: valid UTF-8,
// no NUL bytes (PostgreSQL text cannot hold them), at most max bytes. It
// reports whether it had to cut.
func cleanText(s string, max int) (string, bool) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= max {
		return s, false
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

// runRowOf maps a Run for InsertRuns.
func runRowOf(r *Run, t time.Time) runRow {
	output, cut := cleanText(r.Output, MaxOutputBytes)
	message, _ := cleanText(r.Message, maxMessageBytes)
	trigger := r.Trigger
	if trigger == "" {
		trigger = cluster.TriggerSchedule
	}
	status := r.Status
	if status == "" {
		status = cluster.StatusTriggered
	}
	return runRow{
		FireID:          r.FireID,
		JobID:           r.JobID,
		Trigger:         trigger,
		Status:          status,
		Node:            r.Node,
		ScheduledAt:     utc(r.ScheduledAt),
		DispatchedAt:    utcPtr(r.DispatchedAt),
		StartedAt:       utcPtr(r.StartedAt),
		FinishedAt:      utcPtr(r.FinishedAt),
		ExitCode:        r.ExitCode,
		Output:          output,
		OutputTruncated: r.OutputTruncated || cut,
		Message:         message,
		Attempt:         r.Attempt,
		ShardIndex:      r.ShardIndex,
		ShardTotal:      r.ShardTotal,
		CreatedAt:       t,
		UpdatedAt:       t,
	}
}

// resultRowOf maps a node report to the run row it inserts when its fire
// id is unknown (and whose fields update a known, non-terminal run).
func resultRowOf(r *cluster.RunResult, t time.Time) runRow {
	output, cut := cleanText(r.Output, MaxOutputBytes)
	message, _ := cleanText(r.Message, maxMessageBytes)
	trigger := r.Trigger
	if trigger == "" {
		trigger = cluster.TriggerSchedule
	}
	jobID := r.JobID
	if jobID == 0 {
		if id, err := cluster.JobIDOfFire(r.FireID); err == nil {
			jobID = id
		}
	}
	scheduled := r.ScheduledAt
	switch {
	case !scheduled.IsZero():
	case r.StartedAt != nil && !r.StartedAt.IsZero():
		scheduled = *r.StartedAt
	case r.FinishedAt != nil && !r.FinishedAt.IsZero():
		scheduled = *r.FinishedAt
	default:
		scheduled = t
	}
	return runRow{
		FireID:          r.FireID,
		JobID:           jobID,
		Trigger:         trigger,
		Status:          r.Status,
		Node:            r.Node,
		ScheduledAt:     utc(scheduled),
		StartedAt:       utcPtr(r.StartedAt),
		FinishedAt:      utcPtr(r.FinishedAt),
		ExitCode:        r.ExitCode,
		Output:          output,
		OutputTruncated: r.OutputTruncated || cut,
		Message:         message,
		Attempt:         r.Attempt,
		CreatedAt:       t,
		UpdatedAt:       t,
	}
}
