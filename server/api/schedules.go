package api

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/cronix/cronix/server/schedule"
)

// Schedule preview limits.
const (
	DefaultPreviewCount = 5
	MaxPreviewCount     = 100
)

// maxPreviewYear is the last year a preview shows (RFC 3339 has four-digit years).
const maxPreviewYear = 9999

// SchedulePreview is the reply to GET /api/v1/schedules/preview.
type SchedulePreview struct {
	// ScheduleType is the type evaluated ("cron" when none was given).
	ScheduleType string `json:"schedule_type"`
	// Schedule is the expression, trimmed.
	Schedule string `json:"schedule"`
	// Timezone is the IANA zone the schedule is evaluated in.
	Timezone string `json:"timezone"`
	// Next are the next fire times, RFC 3339 with the zone's offset; fewer
	// than asked (possibly none) when the schedule stops firing or reaches
	// the year 10000. For
	// fixed_delay they assume runs take no time.
	Next []string `json:"next"`
}

// scheduleRoutes registers the schedule preview.
func (s *server) scheduleRoutes(r *mux.Router, v1 string) {
	r.Handle(v1+"/schedules/preview", s.user(MaxBodyBytes, s.previewSchedule)).Methods(http.MethodGet)
}

// previewParams are the query parameters previewSchedule reads; any other
// is refused, so a misspelt one is not silently ignored.
var previewParams = []string{"schedule_type", "schedule", "timezone", "n", "after"}

// unknownParams records every query parameter of q not in known.
func unknownParams(q url.Values, known []string, fields map[string]string) {
	for name := range q {
		if !slices.Contains(known, name) {
			fields[name] = "unknown query parameter (known: " + strings.Join(known, ", ") + ")"
		}
	}
}

// previewSchedule handles GET /api/v1/schedules/preview?schedule_type=&schedule=&timezone=&n=&after=.
func (s *server) previewSchedule(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	typ := strings.TrimSpace(q.Get("schedule_type"))
	expr := strings.TrimSpace(q.Get("schedule"))
	tz := strings.TrimSpace(q.Get("timezone"))
	fields := map[string]string{}
	unknownParams(q, previewParams, fields)

	at := s.now()
	if v := strings.TrimSpace(q.Get("after")); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		switch {
		case err != nil:
			fields["after"] = fmt.Sprintf("after %q is not an RFC 3339 time such as 2026-03-01T09:00:00Z", v)
		case t.UTC().Year() > maxPreviewYear:
			fields["after"] = fmt.Sprintf("after %q is past the year %d", v, maxPreviewYear)
		}
		at = t
	}

	n := DefaultPreviewCount
	if v := q.Get("n"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPreviewCount {
			fields["n"] = fmt.Sprintf("n must be an integer from 1 to %d", MaxPreviewCount)
		}
	}
	if typ == "" {
		typ = defaultScheduleType
	}
	if !schedule.ValidType(typ) {
		fields["schedule_type"] = fmt.Sprintf("unknown schedule type %q (supported: %s)",
			typ, strings.Join(schedule.Types, ", "))
	}
	loc, err := schedule.LoadZone(tz, s.loc)
	if err != nil {
		fields["timezone"] = err.Error()
		loc = s.loc // still check the schedule itself
	}
	var sched schedule.Schedule
	if _, bad := fields["schedule_type"]; !bad {
		sched, err = schedule.Parse(typ, expr, "", loc)
		if err == nil {
			err = schedule.CheckFuture(sched, at)
		}
		if err != nil {
			if errors.Is(err, schedule.ErrUnknownType) {
				fields["schedule_type"] = err.Error()
			} else {
				fields["schedule"] = err.Error()
			}
		}
	}
	if len(fields) > 0 {
		return &ValidationError{Message: "invalid schedule", Fields: fields}
	}

	next := make([]string, 0, n)
	for range n {
		t := sched.Next(at)
		if t.IsZero() || !t.After(at) || t.In(loc).Year() > maxPreviewYear {
			break // RFC 3339 has four-digit years: the preview ends with 9999
		}
		next = append(next, t.In(loc).Format(time.RFC3339))
		at = t
	}
	writeJSON(w, http.StatusOK, SchedulePreview{
		ScheduleType: typ,
		Schedule:     expr,
		Timezone:     loc.String(),
		Next:         next,
	})
	return nil
}
