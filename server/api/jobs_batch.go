package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/store"
)

// Batch create limits.
const (
	// MaxBatchJobs is the most jobs one POST /api/v1/jobs/batch creates.
	MaxBatchJobs = store.MaxJobBatch
	// MaxBatchBodyBytes limits the body of POST /api/v1/jobs/batch.
	MaxBatchBodyBytes = 16 << 20
	// stockMaxTxnOps is etcd's default --max-txn-ops: the batch's signal
	// keys fall back to transactions of this size when etcd refuses one.
	stockMaxTxnOps = 128
)

// batchStore is what creating jobs in batches needs from the store (part
// of Store).
type batchStore interface {
	CreateJobsWithGroupsBy(ctx context.Context, jobs []*store.Job, savedBy string) error
	InsertAudits(ctx context.Context, entries []*store.AuditEntry) error
}

var _ batchStore = (*store.Store)(nil)

// JobBatchRequest is the body of POST /api/v1/jobs/batch (read job by job:
// jobBatchEnvelope).
type JobBatchRequest struct {
	Jobs []JobRequest `json:"jobs"`
}

// JobBatchItem is one created job in a JobBatchResponse, in request order.
type JobBatchItem struct {
	ID       int64    `json:"id"`
	Name     string   `json:"name"`
	Group    string   `json:"group"`
	Warnings []string `json:"warnings,omitempty"`
}

// JobBatchResponse is the reply of POST /api/v1/jobs/batch.
type JobBatchResponse struct {
	Items []JobBatchItem `json:"items"`
}

// createJobBatch handles POST /api/v1/jobs/batch: every job of the body is
// validated as POST /api/v1/jobs validates one, and the batch is stored all
// or nothing: one invalid job (400, its fields named "jobs[i].field"), one
// group outside the caller's grants (403) or one name already taken (409)
// stores none. The jobs, and the new groups they name, are stored in one
// SQL transaction, audited one entry each, and the leader gets one signal
// transaction for the batch.
func (s *server) createJobBatch(w http.ResponseWriter, r *http.Request) error {
	var req jobBatchEnvelope
	if err := decodeJSON(r, &req, true); err != nil {
		if errors.Is(err, errEmptyBody) {
			return &ValidationError{Message: "request body is empty"}
		}
		return err
	}
	switch {
	case len(req.Jobs) == 0:
		return invalidField("jobs", "jobs must hold at least one job")
	case len(req.Jobs) > MaxBatchJobs:
		return invalidField("jobs", fmt.Sprintf("at most %d jobs per batch", MaxBatchJobs))
	}
	ctx := withValidationMemo(r.Context())
	jobs := make([]*store.Job, len(req.Jobs))
	warnings := make([][]string, len(req.Jobs))
	bad := map[string]string{}
	names := map[[2]string]int{}
	for i, raw := range req.Jobs {
		jr, ok := decodeBatchJob(i, raw, bad)
		if !ok {
			continue
		}
		j, ws, err := s.validJob(ctx, nil, jr)
		var ve *ValidationError
		switch {
		case errors.As(err, &ve):
			if len(ve.Fields) == 0 {
				bad[fmt.Sprintf("jobs[%d]", i)] = ve.Message
			}
			for f, msg := range ve.Fields {
				bad[fmt.Sprintf("jobs[%d].%s", i, f)] = msg
			}
			continue
		case err != nil:
			return err
		}
		key := [2]string{j.Group, j.Name}
		if first, dup := names[key]; dup {
			bad[fmt.Sprintf("jobs[%d].name", i)] = fmt.Sprintf("jobs[%d] has the same name in group %q", first, j.Group)
			continue
		}
		names[key] = i
		jobs[i], warnings[i] = j, ws
	}
	if len(bad) > 0 {
		return &ValidationError{Message: "invalid job batch: nothing was created", Fields: bad}
	}
	groups := map[string]bool{}
	for i, j := range jobs {
		if groups[j.Group] {
			continue
		}
		if err := s.checkJobGroup(ctx, j.Group); err != nil {
			var se *statusError
			if errors.As(err, &se) {
				return &statusError{se.status, fmt.Sprintf("jobs[%d]: %s: nothing was created", i, se.msg)}
			}
			return err
		}
		groups[j.Group] = true
	}
	if err := s.store.CreateJobsWithGroupsBy(ctx, jobs, savedBy(ctx)); err != nil {
		var be *store.JobBatchError
		if errors.As(err, &be) && errors.Is(err, store.ErrConflict) {
			j := jobs[be.Index]
			return public(err, "jobs[%d]: a job named %q already exists in group %q: nothing was created", be.Index, j.Name, j.Group)
		}
		return public(err, "cannot create the job batch")
	}
	s.auditBatch(r, jobs)
	if err := s.signalJobs(ctx, jobs); err != nil {
		return err
	}
	out := JobBatchResponse{Items: make([]JobBatchItem, len(jobs))}
	for i, j := range jobs {
		out.Items[i] = JobBatchItem{ID: j.ID, Name: j.Name, Group: j.Group, Warnings: warnings[i]}
	}
	writeJSON(w, http.StatusCreated, out)
	return nil
}

// jobBatchEnvelope is a JobBatchRequest whose jobs are decoded one by one
// (decodeBatchJob), so that a problem of job i is named "jobs[i].field".
type jobBatchEnvelope struct {
	Jobs []json.RawMessage `json:"jobs"`
}

// decodeBatchJob decodes job i of a batch as POST /api/v1/jobs decodes its
// body (unknown fields refused), recording its problems in bad under
// "jobs[i].<field>", or "jobs[i]" when it is not a JSON object. ok is
// false when it could not be decoded.
func decodeBatchJob(i int, raw json.RawMessage, bad map[string]string) (req JobRequest, ok bool) {
	name := fmt.Sprintf("jobs[%d]", i)
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		bad[name] = name + " must be a JSON object"
		return req, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	if err == nil {
		return req, true
	}
	// Named by decodeJSON's own mechanism, under the job's index.
	if ve := bodyFieldError(raw, &JobRequest{}, true); ve != nil && len(ve.Fields) > 0 {
		for f, msg := range ve.Fields {
			bad[name+"."+f] = msg
		}
		return req, false
	}
	// raw is one complete JSON object (the body decoded): it cannot fail
	// otherwise, but say what failed if it does.
	bad[name] = strings.TrimPrefix(err.Error(), "json: ")
	return req, false
}

// auditBatch writes one "create" audit entry per job of a stored batch,
// as POST /api/v1/jobs writes for one, instead of the request's own entry.
func (s *server) auditBatch(r *http.Request, jobs []*store.Job) {
	ctx := r.Context()
	setAudit(ctx, func(a *auditRecord) { a.skip = true })
	p := PrincipalFrom(ctx)
	if p == nil {
		return
	}
	entries := make([]*store.AuditEntry, len(jobs))
	at := s.now()
	for i, j := range jobs {
		e := &store.AuditEntry{At: at, UserID: p.UserID, Username: p.Username, Address: clientAddress(r),
			Action: "create", ObjectType: "job", ObjectID: strconv.FormatInt(j.ID, 10)}
		if b, err := redactJSON(jobFromStore(j)); err == nil {
			e.Diff = b
		}
		entries[i] = e
	}
	if err := s.store.InsertAudits(context.WithoutCancel(ctx), entries); err != nil {
		s.log.ErrorContext(ctx, "audit entries of a job batch not written", "jobs", len(jobs), "error", err)
	}
}

// signalJobs puts the signal keys of jobs in one etcd transaction (in
// transactions of etcd's stock 128 operations when etcd refuses one that
// large), so the leader loads the whole batch at once.
func (s *server) signalJobs(ctx context.Context, jobs []*store.Job) error {
	ops := make([]clientv3.Op, len(jobs))
	for i, j := range jobs {
		ops[i] = clientv3.OpPut(s.keys.JobSignal(j.ID), strconv.FormatInt(j.Revision, 10))
	}
	_, err := s.etcd.Txn(ctx).Then(ops...).Commit()
	if errors.Is(err, rpctypes.ErrTooManyOps) {
		err = nil
		for start := 0; start < len(ops) && err == nil; start += stockMaxTxnOps {
			_, err = s.etcd.Txn(ctx).Then(ops[start:min(start+stockMaxTxnOps, len(ops))]...).Commit()
		}
	}
	switch {
	case err == nil:
		return nil
	case len(jobs) == 1:
		return fmt.Errorf("job %d saved (revision %d) but signalling the scheduler failed: %w", jobs[0].ID, jobs[0].Revision, err)
	default:
		return fmt.Errorf("%d jobs saved but signalling the scheduler failed: %w", len(jobs), err)
	}
}

// validationMemo keeps, for one batch request, what validating many jobs
// would otherwise read again for each: the live nodes, and the params
// verdicts (schema and plugin) per node pin, group, handler and params.
type validationMemo struct {
	mu     sync.Mutex
	nodes  []cluster.NodeInfo
	loaded bool
	params map[string]string
}

type validationMemoKey struct{}

func withValidationMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, validationMemoKey{}, &validationMemo{params: map[string]string{}})
}

func memoFrom(ctx context.Context) *validationMemo {
	m, _ := ctx.Value(validationMemoKey{}).(*validationMemo)
	return m
}

// validationNodes is liveNodes, read once per batch request.
func (s *server) validationNodes(ctx context.Context) ([]cluster.NodeInfo, error) {
	m := memoFrom(ctx)
	if m == nil {
		return s.liveNodes(ctx)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.loaded {
		nodes, err := s.liveNodes(ctx)
		if err != nil {
			return nil, err
		}
		m.nodes, m.loaded = nodes, true
	}
	return m.nodes, nil
}

// paramsVerdict is the params message of a job whose handler a live node
// of its group offers: the handler's schema (checkParamsSchema), then, when
// other fields are valid, the plugin's own Validate (checkParamsPlugin);
// "" when the params pass. Within a batch request, equal params of the
// same handler, group and pin are checked once.
func (s *server) paramsVerdict(ctx context.Context, nodes []cluster.NodeInfo, j *store.Job, othersValid bool) (string, error) {
	check := func() (string, error) {
		msg, err := s.checkParamsSchema(ctx, nodes, j.Group, j.Handler, j.Params)
		if err != nil || msg != "" || !othersValid {
			return msg, err
		}
		return s.checkParamsPlugin(ctx, nodes, j.NodeUUID, j.Group, j.Handler, j.Params), nil
	}
	m := memoFrom(ctx)
	if m == nil {
		return check()
	}
	key := strings.Join([]string{strconv.FormatBool(othersValid), j.NodeUUID, j.Group, j.Handler, string(j.Params)}, "\x00")
	m.mu.Lock()
	msg, ok := m.params[key]
	m.mu.Unlock()
	if ok {
		return msg, nil
	}
	msg, err := check()
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	m.params[key] = msg
	m.mu.Unlock()
	return msg, nil
}
