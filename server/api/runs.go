package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// listRuns handles GET /api/v1/jobs/{id}/runs (filters as listAllRuns).
func (s *server) listRuns(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "job")
	if err != nil {
		return err
	}
	p, f, err := parseRunFilter(r)
	if err != nil {
		return err
	}
	f.JobID = id
	ctx := r.Context()
	if _, err := s.store.GetJob(ctx, id); err != nil {
		return public(err, "job %d not found", id)
	}
	return s.writeRuns(w, r, f, p)
}

// listAllRuns handles GET /api/v1/runs?job_id= &status= &node= &from= &to=
// (RFC 3339; from inclusive, to exclusive, on scheduled_at) and paging.
func (s *server) listAllRuns(w http.ResponseWriter, r *http.Request) error {
	p, f, err := parseRunFilter(r)
	if err != nil {
		return err
	}
	if v := r.URL.Query().Get("job_id"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			return invalidField("job_id", "job_id must be a positive integer")
		}
		f.JobID = id
	}
	return s.writeRuns(w, r, f, p)
}

// parseRunFilter reads paging, status, node, from and to.
func parseRunFilter(r *http.Request) (store.Page, store.RunFilter, error) {
	var f store.RunFilter
	p, err := parsePage(r)
	if err != nil {
		return p, f, err
	}
	q := r.URL.Query()
	fields := map[string]string{}
	f.Status = strings.TrimSpace(q.Get("status"))
	if f.Status != "" && !knownStatus(f.Status) {
		fields["status"] = fmt.Sprintf("unknown status %q", f.Status)
	}
	f.Node = strings.TrimSpace(q.Get("node"))
	for name, dst := range map[string]*time.Time{"from": &f.From, "to": &f.To} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				fields[name] = name + " must be an RFC 3339 time such as 2026-03-01T12:00:00Z"
			}
			*dst = t
		}
	}
	if len(fields) > 0 {
		return p, f, &ValidationError{Message: "invalid run filter", Fields: fields}
	}
	return p, f, nil
}

// writeRuns writes the page of runs f selects.
func (s *server) writeRuns(w http.ResponseWriter, r *http.Request, f store.RunFilter, p store.Page) error {
	f.Scope = PrincipalFrom(r.Context()).Scope()
	runs, total, err := s.store.FindRuns(r.Context(), f, p)
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	out := List[Run]{Items: make([]Run, 0, len(runs)), Total: total, Page: p.Page, PageSize: p.PageSize}
	for i := range runs {
		out.Items = append(out.Items, runFromStore(&runs[i]))
	}
	if err := s.nameRuns(r.Context(), out.Items); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// nameRuns sets the job name of runs, with one query for the page.
func (s *server) nameRuns(ctx context.Context, runs []Run) error {
	var ids []int64
	for _, r := range runs {
		if !slices.Contains(ids, r.JobID) {
			ids = append(ids, r.JobID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	labels, err := s.store.JobLabels(ctx, ids)
	if err != nil {
		return fmt.Errorf("names of the runs' jobs: %w", err)
	}
	for i := range runs {
		runs[i].JobName = labels[runs[i].JobID].Name
	}
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
	out := []Run{runFromStore(run)}
	if err := s.nameRuns(r.Context(), out); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out[0])
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
	received := len(batch.Results)
	if received > 0 {
		// Only results for fires dispatched to the reporting node count;
		// the others are acknowledged (so the node stops sending them) but
		// not stored, and recorded as security events.
		kept, err := s.foreignResults(r.Context(), batch.Results)
		if err != nil {
			return err
		}
		batch.Results = kept
	}
	if len(batch.Results) > 0 {
		finished, err := s.store.ApplyResultsFinished(r.Context(), batch.Results)
		if err != nil {
			return fmt.Errorf("apply %d results: %w", len(batch.Results), err)
		}
		if err := s.fireChildren(r.Context(), finished); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, cluster.ResultAck{Accepted: received})
	return nil
}

// maxTxnOps is the most operations fireChildren puts in one etcd transaction.
const maxTxnOps = 100

// fireChildren asks the leader to fire the child jobs of every run that this
// batch moved to success: one etcd transaction putting each child's once
// key, requested by "parent:<fire id>". Runs that were already terminal
// (a replayed report) are not in finished, so children fire once. The
// parents' child lists are read with one query per batch, of the jobs that
// have children.
func (s *server) fireChildren(ctx context.Context, finished []store.Finished) error {
	var parents []int64
	seenJob := map[int64]bool{}
	for _, f := range finished {
		if f.Status == cluster.StatusSuccess && !seenJob[f.JobID] {
			seenJob[f.JobID] = true
			parents = append(parents, f.JobID)
		}
	}
	if len(parents) == 0 {
		return nil
	}
	children, err := s.store.ChildJobIDs(ctx, parents)
	if err != nil {
		return fmt.Errorf("read the child jobs of %d jobs: %w", len(parents), err)
	}
	if len(children) == 0 {
		return nil
	}
	var ops []clientv3.Op
	for _, f := range finished {
		if f.Status != cluster.StatusSuccess {
			continue
		}
		for _, child := range children[f.JobID] {
			b, err := json.Marshal(cluster.OnceRequest{RequestedAt: s.now().UTC(), RequestedBy: "parent:" + f.FireID})
			if err != nil {
				return fmt.Errorf("encode once request: %w", err)
			}
			ops = append(ops, clientv3.OpPut(s.keys.Once(child), string(b)))
		}
	}
	if len(ops) == 0 {
		return nil
	}
	// A transaction may not put one key twice: the last request per child wins.
	seen := map[string]int{}
	var uniq []clientv3.Op
	for _, op := range ops {
		k := string(op.KeyBytes())
		if i, ok := seen[k]; ok {
			uniq[i] = op
			continue
		}
		seen[k] = len(uniq)
		uniq = append(uniq, op)
	}
	// One transaction per maxTxnOps puts (etcd's default limit is 128).
	for len(uniq) > 0 {
		n := min(len(uniq), maxTxnOps)
		if _, err := s.etcd.Txn(ctx).Then(uniq[:n]...).Commit(); err != nil {
			return fmt.Errorf("fire %d child jobs: %w", n, err)
		}
		uniq = uniq[n:]
	}
	return nil
}
