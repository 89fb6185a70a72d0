package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/cronix/cronix/cluster"
)

// listRuns handles GET /api/v1/jobs/{id}/runs.
func (s *server) listRuns(w http.ResponseWriter, r *http.Request) error {
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
	runs, total, err := s.store.ListRuns(ctx, id, p)
	if err != nil {
		return fmt.Errorf("list runs of job %d: %w", id, err)
	}
	out := List[Run]{Items: make([]Run, 0, len(runs)), Total: total, Page: p.Page, PageSize: p.PageSize}
	for i := range runs {
		out.Items = append(out.Items, runFromStore(&runs[i]))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getRun handles GET /api/v1/runs/{id}.
func (s *server) getRun(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "run")
	if err != nil {
		return err
	}
	run, err := s.store.GetRun(r.Context(), id)
	if err != nil {
		return public(err, "run %d not found", id)
	}
	writeJSON(w, http.StatusOK, runFromStore(run))
	return nil
}

// knownStatus reports whether a node may report status.
func knownStatus(status string) bool {
	return status == cluster.StatusRunning || status == cluster.StatusTriggered || cluster.Terminal(status)
}

// postResults handles POST /api/v1/internal/results: a node's batch of run
// results, stored with one ApplyResults call. Unknown JSON fields are
// ignored here (a newer node may send more than this server knows).
func (s *server) postResults(w http.ResponseWriter, r *http.Request) error {
	var batch cluster.ResultBatch
	if err := decodeJSON(r, &batch, false); err != nil {
		if errors.Is(err, errEmptyBody) {
			return &ValidationError{Message: "request body is empty"}
		}
		return err
	}
	fields := map[string]string{}
	for i, res := range batch.Results {
		prefix := fmt.Sprintf("results[%d].", i)
		jobID, err := cluster.JobIDOfFire(res.FireID)
		switch {
		case res.FireID == "":
			fields[prefix+"fire_id"] = "fire_id is required"
		case err != nil:
			fields[prefix+"fire_id"] = fmt.Sprintf("malformed fire id %q", res.FireID)
		case jobID != res.JobID:
			fields[prefix+"job_id"] = fmt.Sprintf("job_id %d does not match fire id %q", res.JobID, res.FireID)
		}
		if !knownStatus(res.Status) {
			fields[prefix+"status"] = fmt.Sprintf("unknown status %q", res.Status)
		}
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid result batch", Fields: fields}
	}
	if len(batch.Results) > 0 {
		if err := s.store.ApplyResults(r.Context(), batch.Results); err != nil {
			return fmt.Errorf("apply %d results: %w", len(batch.Results), err)
		}
	}
	writeJSON(w, http.StatusOK, cluster.ResultAck{Accepted: len(batch.Results)})
	return nil
}
