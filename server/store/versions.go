package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/uptrace/bun"
)

// JobVersion is one saved version of a job: what a create or an update
// wrote, kept after later saves (xxl-job's glue log). A job has one version
// per revision; deleting the job deletes its versions.
type JobVersion struct {
	ID           int64
	JobID        int64
	Revision     int64 // the job's Revision this save produced
	Name         string
	ScheduleType string
	Schedule     string
	Timezone     string
	Handler      string
	Params       json.RawMessage // JSON object as saved, e.g. a shell job's script
	SavedAt      time.Time       // UTC; the job's UpdatedAt of that revision
	SavedBy      string          // user name of whoever saved it, "" if unknown
}

type jobVersionRow struct {
	bun.BaseModel `bun:"table:job_versions,alias:v"`

	ID           int64     `bun:"id,pk,autoincrement"`
	JobID        int64     `bun:"job_id,notnull"`
	Revision     int64     `bun:"revision,notnull"`
	Name         string    `bun:"name,notnull"`
	ScheduleType string    `bun:"schedule_type,notnull"`
	Schedule     string    `bun:"schedule,notnull"`
	Timezone     string    `bun:"timezone,notnull"`
	Handler      string    `bun:"handler,notnull"`
	Params       string    `bun:"params,notnull"`
	SavedAt      time.Time `bun:"saved_at,notnull"`
	SavedBy      string    `bun:"saved_by,notnull"`
}

// jobVersionColumns are the columns insertJobVersion writes (all but id).
var jobVersionColumns = []string{
	"job_id", "revision", "name", "schedule_type", "schedule", "timezone", "handler", "params",
	"saved_at", "saved_by",
}

func (r *jobVersionRow) domain() JobVersion {
	return JobVersion{
		ID:           r.ID,
		JobID:        r.JobID,
		Revision:     r.Revision,
		Name:         r.Name,
		ScheduleType: r.ScheduleType,
		Schedule:     r.Schedule,
		Timezone:     r.Timezone,
		Handler:      r.Handler,
		Params:       json.RawMessage(r.Params),
		SavedAt:      r.SavedAt.UTC(),
		SavedBy:      r.SavedBy,
	}
}

// insertJobVersion records revision rev of job row j, in the transaction
// that saved j.
func insertJobVersion(ctx context.Context, tx bun.Tx, j *jobRow, jobID, rev int64, savedAt time.Time, savedBy string) error {
	v := jobVersionRow{
		JobID:        jobID,
		Revision:     rev,
		Name:         j.Name,
		ScheduleType: j.ScheduleType,
		Schedule:     j.Schedule,
		Timezone:     j.Timezone,
		Handler:      j.Handler,
		Params:       j.Params,
		SavedAt:      savedAt,
		SavedBy:      savedBy,
	}
	_, err := tx.NewInsert().Model(&v).Column(jobVersionColumns...).Exec(ctx)
	return err
}

// ListJobVersions returns a page of job jobID's saved versions, newest
// revision first, and how many it has in all. An unknown job has none.
func (s *Store) ListJobVersions(ctx context.Context, jobID int64, p Page) ([]JobVersion, int, error) {
	total, err := s.db.NewSelect().Model((*jobVersionRow)(nil)).Where("v.job_id = ?", jobID).Count(ctx)
	if err != nil {
		return nil, 0, wrap(err, "count versions of job %d", jobID)
	}
	var rows []jobVersionRow
	q := s.db.NewSelect().Model(&rows).Where("v.job_id = ?", jobID).Order("v.revision DESC")
	if err := paginate(q, p).Scan(ctx); err != nil {
		return nil, 0, wrap(err, "list versions of job %d", jobID)
	}
	out := make([]JobVersion, len(rows))
	for i := range rows {
		out[i] = rows[i].domain()
	}
	return out, int(total), nil
}
