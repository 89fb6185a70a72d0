package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/server/store"
)

// versionStore is what saving a job with its author and reading a job's
// saved versions need from the store (part of Store).
type versionStore interface {
	CreateJobWithGroupBy(ctx context.Context, j *store.Job, savedBy string) error
	UpdateJobWithGroupBy(ctx context.Context, j *store.Job, savedBy string) error
	ListJobVersions(ctx context.Context, jobID int64, p store.Page) ([]store.JobVersion, int, error)
}

var _ versionStore = (*store.Store)(nil)

// JobVersion is one saved version of a job in GET /api/v1/jobs/{id}/versions.
type JobVersion struct {
	Revision     int64           `json:"revision"`
	Name         string          `json:"name"`
	ScheduleType string          `json:"schedule_type"`
	Schedule     string          `json:"schedule"`
	Timezone     string          `json:"timezone"`
	Handler      string          `json:"handler"`
	Params       json.RawMessage `json:"params"`
	SavedAt      Time            `json:"saved_at"`
	// SavedBy is the user who saved it, "" when unknown.
	SavedBy string `json:"saved_by"`
}

func jobVersionFromStore(v *store.JobVersion) JobVersion {
	params := v.Params
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	return JobVersion{
		Revision: v.Revision, Name: v.Name, ScheduleType: v.ScheduleType, Schedule: v.Schedule,
		Timezone: v.Timezone, Handler: v.Handler, Params: params, SavedAt: Time{v.SavedAt}, SavedBy: v.SavedBy,
	}
}

// versionRoutes registers the saved-versions listing under v1.
func (s *server) versionRoutes(r *mux.Router, v1 string) {
	r.Handle(v1+"/jobs/{id:[0-9]+}/versions", s.user(MaxBodyBytes, s.listJobVersions)).Methods(http.MethodGet)
}

// listJobVersions handles GET /api/v1/jobs/{id}/versions?page= &page_size=:
// the job's saved versions, newest revision first.
func (s *server) listJobVersions(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "job")
	if err != nil {
		return err
	}
	p, err := parsePage(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if _, err := s.store.GetJob(ctx, id); err != nil {
		return public(err, "job %d not found", id)
	}
	versions, total, err := s.store.ListJobVersions(ctx, id, p)
	if err != nil {
		return fmt.Errorf("list versions of job %d: %w", id, err)
	}
	out := List[JobVersion]{Items: make([]JobVersion, 0, len(versions)), Total: total, Page: p.Page, PageSize: p.PageSize}
	for i := range versions {
		out.Items = append(out.Items, jobVersionFromStore(&versions[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// savedBy is the name of the user saving a job in ctx, "" when none is
// logged in (a front door that does not put its user in the context).
func savedBy(ctx context.Context) string {
	return userName(ctx)
}

// storeNewJob stores the new job j, its first version, saved by the
// context's user, and its group when no group has its name yet, all in
// one transaction.
func (s *server) storeNewJob(ctx context.Context, j *store.Job) error {
	return s.store.CreateJobWithGroupBy(ctx, j, savedBy(ctx))
}

// storeJobUpdate stores the update of j, its new version, saved by the
// context's user, and its group when no group has its name yet, all in
// one transaction.
func (s *server) storeJobUpdate(ctx context.Context, j *store.Job) error {
	return s.store.UpdateJobWithGroupBy(ctx, j, savedBy(ctx))
}
