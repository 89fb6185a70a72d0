// Package compat serves the xxl-job 2.x admin API (seed 001) on top of
// Cronix's job model, so operations portals written for xxl-job keep
// working: /jobgroup/list and /jobinfo/{list,add,update,trigger,start,stop,remove}.
//
// Requests may carry their parameters as query parameters, a form-encoded
// body or a JSON object body; replies use xxl-job's envelopes:
// {"recordsFiltered","data","recordsTotal"} for lists and
// {"code":200,"msg":null,"content":...} otherwise (code 500 with a message
// on failure, 401 without a valid token). The handler is served behind
// server/api (api.Config.Compat), whose authorization middleware checks
// every path against authz.Routes like any REST route: an API token in the
// XXL-JOB-ACCESS-TOKEN header (xxl-job's accessToken) or as a bearer
// token, and the caller's groups. Jobs are saved through
// api.Jobs, so validation, group creation and the leader's signal key are
// exactly the REST API's. See docs/api.md for the field mapping.
package compat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cronix/cronix/cluster"
	"github.com/cronix/cronix/server/api"
	"github.com/cronix/cronix/server/authz"
	"github.com/cronix/cronix/server/catalog"
	"github.com/cronix/cronix/server/store"
)

// TokenHeader is xxl-job's access token header.
const TokenHeader = api.XXLTokenHeader

// TimeLayout is how xxl-job (Jackson) writes addTime/updateTime, as in seed 001.
const TimeLayout = "2006-01-02T15:04:05.000-0700"

// maxBodyBytes limits request bodies.
const maxBodyBytes = 1 << 20

// Config configures the compat handler.
type Config struct {
	// Store is the SQL record. Required.
	Store api.Store
	// Etcd is the client to the live cluster state. Required.
	Etcd *clientv3.Client
	// Keys builds etcd keys; the zero value uses cluster.DefaultRoot.
	Keys cluster.Keys
	// Location is the time zone of schedules (xxl-job cron has no zone of its own); nil = time.Local.
	Location *time.Location
	// Logger receives internal errors; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// NodeToken lets job saves ask a node to validate params with the
	// handler plugin (as /api/v1 does); "" skips that check.
	NodeToken string
	// Catalog is the handler catalog jobs are validated against (as
	// /api/v1 does); nil builds one without built-in handlers.
	Catalog *catalog.Catalog
}

// handler serves the compat API.
type handler struct {
	store api.Store
	jobs  *api.Jobs
	loc   *time.Location
	log   *slog.Logger
	now   func() time.Time
}

// New returns the handler of /jobgroup/* and /jobinfo/*. It panics if
// Store or Etcd is missing (a wiring mistake).
func New(cfg Config) http.Handler {
	if cfg.Store == nil || cfg.Etcd == nil {
		panic("compat: Config.Store and Config.Etcd are required")
	}
	h := &handler{
		store: cfg.Store,
		jobs: api.NewJobs(api.Config{Store: cfg.Store, Etcd: cfg.Etcd, Keys: cfg.Keys, Location: cfg.Location,
			Logger: cfg.Logger, Now: cfg.Now, NodeToken: cfg.NodeToken, Catalog: cfg.Catalog}),
		loc: cfg.Location,
		log: cfg.Logger,
		now: cfg.Now,
	}
	if h.loc == nil {
		h.loc = time.Local
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	routes := map[string]func(ctx context.Context, w http.ResponseWriter, p params, u *authz.Principal) error{
		"/jobgroup/list":   h.groupList,
		"/jobinfo/list":    h.jobList,
		"/jobinfo/add":     h.jobAdd,
		"/jobinfo/update":  h.jobUpdate,
		"/jobinfo/trigger": h.jobTrigger,
		"/jobinfo/start":   h.jobStart,
		"/jobinfo/stop":    h.jobStop,
		"/jobinfo/remove":  h.jobRemove,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fn, ok := routes[r.URL.Path]
		if !ok {
			api.SkipAudit(r.Context())
			writeJSON(w, http.StatusNotFound, ReturnT{Code: http.StatusNotFound, Msg: ptr("no such xxl-job API route")})
			return
		}
		list := strings.HasSuffix(r.URL.Path, "/list")
		if r.Method != http.MethodPost && (!list || r.Method != http.MethodGet) {
			api.SkipAudit(r.Context())
			writeJSON(w, http.StatusMethodNotAllowed, ReturnT{Code: http.StatusMethodNotAllowed, Msg: ptr("method not allowed")})
			return
		}
		// Authorization happened in front (server/api's authorize, against
		// authz.Routes); a request that did not pass it has no principal.
		u := api.PrincipalFrom(r.Context())
		if u == nil {
			h.writeError(w, r, errUnauthorized)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		p, err := readParams(r)
		if err != nil {
			h.writeError(w, r, err)
			return
		}
		if err := fn(r.Context(), w, p, u); err != nil {
			h.writeError(w, r, err)
		}
	})
}

// ReturnT is xxl-job's reply envelope.
type ReturnT struct {
	Code    int     `json:"code"`
	Msg     *string `json:"msg"`
	Content any     `json:"content"`
}

// PageList is xxl-job's list envelope.
type PageList[T any] struct {
	RecordsFiltered int `json:"recordsFiltered"`
	Data            []T `json:"data"`
	RecordsTotal    int `json:"recordsTotal"`
}

func ptr(s string) *string { return &s }

// badRequest is invalid input, answered with code 500 like xxl-job.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func invalid(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }

var errUnauthorized = errors.New("missing or invalid access token")

// denied is a request the caller's grants do not allow, answered with HTTP
// 403 and code 403 (as server/api's authorization answers on this API).
type denied struct{ msg string }

func (e *denied) Error() string { return e.msg }

// writeError answers err in the ReturnT envelope: 401 for a bad token; 403
// for a group outside the caller's grants; code 500 with HTTP 200 for
// invalid input, unknown ids and conflicts (as xxl-job does); HTTP 500 for
// internal errors. The call failed: it writes no audit entry, whatever its
// HTTP status.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		br  *badRequest
		ve  *api.ValidationError
		mbe *http.MaxBytesError
		de  *denied
	)
	api.SkipAudit(r.Context())
	if status, msg, ok := api.StatusOf(err); ok {
		writeJSON(w, status, ReturnT{Code: status, Msg: ptr(msg)})
		return
	}
	switch {
	case errors.As(err, &de):
		writeJSON(w, http.StatusForbidden, ReturnT{Code: http.StatusForbidden, Msg: ptr(de.msg)})
	case errors.Is(err, errUnauthorized):
		writeJSON(w, http.StatusUnauthorized, ReturnT{Code: http.StatusUnauthorized, Msg: ptr(err.Error())})
	case errors.As(err, &br):
		writeJSON(w, http.StatusOK, ReturnT{Code: 500, Msg: ptr(br.msg)})
	case errors.As(err, &ve):
		writeJSON(w, http.StatusOK, ReturnT{Code: 500, Msg: ptr(validationMessage(ve))})
	case errors.As(err, &mbe):
		writeJSON(w, http.StatusRequestEntityTooLarge, ReturnT{Code: 500, Msg: ptr("request body too large")})
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrConflict):
		msg := err.Error()
		if i := strings.Index(msg, ": "); i > 0 {
			msg = msg[:i] // the public part (api errors start with it)
		}
		writeJSON(w, http.StatusOK, ReturnT{Code: 500, Msg: ptr(msg)})
	default:
		h.log.ErrorContext(r.Context(), "xxl-job compat request failed",
			slog.String("path", r.URL.Path), slog.Any("error", err))
		writeJSON(w, http.StatusInternalServerError, ReturnT{Code: 500, Msg: ptr("internal error")})
	}
}

// xxlField names the xxl-job parameter of an API job field, for messages.
var xxlField = map[string]string{
	"name": "jobDesc", "group": "jobGroup", "schedule": "jobCron", "schedule_type": "scheduleType",
	"handler": "executorHandler", "params": "executorParam", "timeout_seconds": "executorTimeout",
	"route_strategy": "executorRouteStrategy", "block_strategy": "executorBlockStrategy",
	"misfire_policy": "misfireStrategy", "retry_count": "executorFailRetryCount",
	"alarm_emails": "alarmEmail", "child_job_ids": "childJobId", "author": "author",
}

func validationMessage(ve *api.ValidationError) string {
	if len(ve.Fields) == 0 {
		return ve.Message
	}
	keys := make([]string, 0, len(ve.Fields))
	for k := range ve.Fields {
		keys = append(keys, k)
	}
	sortStrings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		name := k
		if x, ok := xxlField[k]; ok {
			name = x
		}
		parts = append(parts, name+": "+ve.Fields[k])
	}
	return ve.Message + ": " + strings.Join(parts, "; ")
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":500,"msg":"internal error","content":null}`)
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// params are a request's parameters: query, then form or JSON body (the
// body wins). JSON numbers and booleans are kept as their literal text.
type params map[string]string

func (p params) has(k string) bool { _, ok := p[k]; return ok }

func (p params) str(k string) string { return strings.TrimSpace(p[k]) }

// int reads an integer parameter; blank is def.
func (p params) int(k string, def int64) (int64, error) {
	v := p.str(k)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, invalid("%s must be an integer, not %q", k, v)
	}
	return n, nil
}

// id reads an id parameter: blank is 0 (not given); anything but a
// positive integer is refused.
func (p params) id(k string) (int64, error) {
	v := p.str(k)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, invalid("%s must be a positive integer, not %q", k, v)
	}
	return n, nil
}

func readParams(r *http.Request) (params, error) {
	p := params{}
	for k, v := range r.URL.Query() {
		if len(v) > 0 {
			p[k] = v[0]
		}
	}
	if r.Body == nil || r.Method == http.MethodGet {
		return p, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, invalid("cannot read the request body: %v", err)
	}
	trimmed := strings.TrimSpace(string(body))
	if trimmed == "" {
		return p, nil
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/json" || (ct == "" && strings.HasPrefix(trimmed, "{")) || strings.HasPrefix(trimmed, "{") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, invalid("malformed JSON body: %v", err)
		}
		for k, raw := range m {
			var s string
			switch {
			case string(raw) == "null":
				s = ""
			case json.Unmarshal(raw, &s) == nil:
			default:
				s = string(raw) // number, boolean, or nested value as JSON text
			}
			p[k] = s
		}
		return p, nil
	}
	form, err := url.ParseQuery(trimmed)
	if err != nil {
		return nil, invalid("malformed form body: %v", err)
	}
	for k, v := range form {
		if len(v) > 0 {
			p[k] = v[0]
		}
	}
	return p, nil
}

// rows is a window of a list: size rows from offset.
type rows struct{ offset, size int }

// page reads pageNum/pageSize (seed 001) or xxl-job's start/length.
func page(p params) (rows, error) {
	size, err := p.int("pageSize", 10)
	if err != nil {
		return rows{}, err
	}
	num, err := p.int("pageNum", 1)
	if err != nil {
		return rows{}, err
	}
	if p.has("length") {
		if size, err = p.int("length", 10); err != nil {
			return rows{}, err
		}
	}
	if size < 1 || size > api.MaxPageSize {
		return rows{}, invalid("pageSize must be from 1 to %d", api.MaxPageSize)
	}
	if num < 1 || num > api.MaxPage {
		return rows{}, invalid("pageNum must be from 1 to %d", api.MaxPage)
	}
	offset := (num - 1) * size
	if p.has("start") {
		start, err := p.int("start", 0)
		if err != nil {
			return rows{}, err
		}
		if start < 0 || start > api.MaxPage {
			return rows{}, invalid("start must be from 0 to %d", api.MaxPage)
		}
		offset = start
	}
	return rows{offset: int(offset), size: int(size)}, nil
}

// readRows reads the rows of w and the total through find, which reads one
// store page. Store pages count from 1 and hold w.size rows: an offset that
// is a multiple of the size is one page; any other is the end of one page
// and the start of the next (read only when the first is full and rows
// remain). The store is never asked for more than w.size rows (at most
// api.MaxPageSize) at a time, whatever the offset.
func readRows[T any](w rows, find func(store.Page) ([]T, int, error)) ([]T, int, error) {
	first := store.Page{Page: w.offset/w.size + 1, PageSize: w.size}
	items, total, err := find(first)
	if err != nil {
		return nil, 0, err
	}
	skip := w.offset % w.size
	if skip == 0 {
		return items, total, nil
	}
	full := len(items) == w.size
	items = items[min(skip, len(items)):]
	if !full || first.Page*w.size >= total {
		return items, total, nil
	}
	next, _, err := find(store.Page{Page: first.Page + 1, PageSize: w.size})
	if err != nil {
		return nil, 0, err
	}
	return append(items, next[:min(skip, len(next))]...), total, nil
}
