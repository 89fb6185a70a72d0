package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"

	_ "modernc.org/sqlite" // the driver Cronix's store uses

	"github.com/cronix/cronix/integration/harness"
)

// bulkInsertJobs adds n enabled jobs to the SQLite file of a stopped
// standalone in one transaction. Each copies the first API-created scale
// job (so every column, timestamps included, is in the store's own
// format) with its own name and schedule, and gets its first job version
// as the store would write it.
func bulkInsertJobs(ctx context.Context, path string, n int, schedule func(i int) string) error {
	if n <= 0 {
		return nil
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("bulk insert: opening %s: %w", path, err)
	}
	defer db.Close()
	var tmpl, maxID int64
	if err := db.QueryRowContext(ctx, `SELECT MIN(id), MAX(id) FROM jobs WHERE name LIKE 'scale-%'`).Scan(&tmpl, &maxID); err != nil {
		return fmt.Errorf("bulk insert: finding the template job (create at least one scale job through the API): %w", err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("bulk insert: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO jobs (name, group_name, schedule_type, schedule, timezone, handler, params,
		timeout_seconds, enabled, description, author, revision, route_strategy, block_strategy, misfire_policy,
		retry_count, retry_interval_seconds, alarm_emails, child_job_ids, created_at, updated_at)
		SELECT ?, group_name, schedule_type, ?, timezone, handler, params,
		timeout_seconds, enabled, description, author, revision, route_strategy, block_strategy, misfire_policy,
		retry_count, retry_interval_seconds, alarm_emails, child_job_ids, created_at, updated_at FROM jobs WHERE id = ?`)
	if err != nil {
		return fmt.Errorf("bulk insert: preparing: %w", err)
	}
	defer stmt.Close()
	for i := 0; i < n; i++ {
		res, err := stmt.ExecContext(ctx, fmt.Sprintf("scale-bulk-%06d", i), schedule(i), tmpl)
		if err != nil {
			return fmt.Errorf("bulk insert: job %d: %w", i, err)
		}
		if k, err := res.RowsAffected(); err != nil || k != 1 {
			return errors.Join(fmt.Errorf("bulk insert: job %d: %d rows", i, k), err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO job_versions (job_id, revision, name, schedule_type, schedule, timezone, handler, params, saved_at, saved_by)
		SELECT id, revision, name, schedule_type, schedule, timezone, handler, params, updated_at, '' FROM jobs WHERE id > ?`, maxID); err != nil {
		return fmt.Errorf("bulk insert: job versions: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("bulk insert: commit: %w", err)
	}
	return nil
}

// batchSize is how many jobs one POST /api/v1/jobs/batch creates.
const batchSize = 1000

// createJobsBatch creates n jobs through POST /api/v1/jobs/batch, batchSize
// per request, with workers requests in flight.
func createJobsBatch(ctx context.Context, api *harness.Client, n, workers int, body func(i int) map[string]any) ([]int64, error) {
	ids := make([]int64, n)
	err := inPool(ctx, n, batchSize, workers, func(start int) error {
		end := min(start+batchSize, n)
		jobs := make([]map[string]any, 0, end-start)
		for i := start; i < end; i++ {
			jobs = append(jobs, body(i))
		}
		var out struct {
			Items []struct {
				ID int64 `json:"id"`
			} `json:"items"`
		}
		code, err := api.Do(http.MethodPost, "/api/v1/jobs/batch", map[string]any{"jobs": jobs}, &out)
		if err == nil && (code != http.StatusCreated || len(out.Items) != end-start) {
			err = fmt.Errorf("status %d, %d items", code, len(out.Items))
		}
		if err != nil {
			return fmt.Errorf("creating jobs %d..%d: %w", start, end-1, err)
		}
		for i, it := range out.Items {
			ids[start+i] = it.ID
		}
		return nil
	})
	return ids, err
}
