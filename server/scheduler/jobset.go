package scheduler

import (
	"encoding/json"

	"github.com/cronix/cronix/server/schedule"
	"github.com/cronix/cronix/server/store"
)

// Memory per enabled job: the loop keeps one entry per job for the whole
// term, so a leader with 100,000 jobs holds 100,000 of them. An entry keeps
// only the fields the trigger loop, routing and placement read (jobSpec); strings
// many jobs share (group, handler, strategies, zone, schedule) and small
// params are interned, and parsed schedules are shared by every job with
// the same type, zone and expression (a Schedule is immutable).
const (
	// maxInterned bounds each intern table: past it, new values are kept
	// as they are (correct, just not shared).
	maxInterned = 1 << 16
	// maxInternedParams is the largest params value interned.
	maxInternedParams = 1 << 10
)

// jobSpec is what the loop keeps of a job: the fields the trigger loop,
// routing, dispatch and placement read (a store.Job also carries the
// description, author, alarm addresses, child jobs and timestamps). Child
// jobs are fired by the results API, which reads the job from the store.
type jobSpec struct {
	ID                   int64
	Revision             int64
	Name                 string
	Group                string
	ScheduleType         string
	Schedule             string
	Timezone             string
	Handler              string
	Params               json.RawMessage
	RouteStrategy        string
	BlockStrategy        string
	MisfirePolicy        string
	NodeUUID             string
	TimeoutSeconds       int
	MisfireMaxCatchUp    int
	RetryCount           int
	RetryIntervalSeconds int
	Enabled              bool
}

// spec is the loop's copy of j, its shared strings and small params
// interned.
func (l *loop) spec(j *store.Job) jobSpec {
	s := jobSpec{
		ID: j.ID, Revision: j.Revision, Name: j.Name,
		Group: l.intern(j.Group), ScheduleType: l.intern(j.ScheduleType), Schedule: l.intern(j.Schedule),
		Timezone: l.intern(j.Timezone), Handler: l.intern(j.Handler), Params: j.Params,
		RouteStrategy: l.intern(j.RouteStrategy), BlockStrategy: l.intern(j.BlockStrategy),
		MisfirePolicy: l.intern(j.MisfirePolicy), NodeUUID: l.intern(j.NodeUUID),
		TimeoutSeconds: j.TimeoutSeconds, MisfireMaxCatchUp: j.MisfireMaxCatchUp,
		RetryCount: j.RetryCount, RetryIntervalSeconds: j.RetryIntervalSeconds, Enabled: j.Enabled,
	}
	if len(s.Params) <= maxInternedParams {
		if p, ok := l.params[string(s.Params)]; ok {
			s.Params = p
		} else if len(l.params) < maxInterned {
			l.params[string(s.Params)] = s.Params
		}
	}
	return s
}

// intern returns the loop's copy of s, so equal strings of many jobs share
// one allocation.
func (l *loop) intern(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := l.strs[s]; ok {
		return v
	}
	if len(l.strs) < maxInterned {
		l.strs[s] = s
	}
	return s
}

// parseSchedule parses j's schedule, or returns the schedule already parsed
// for the same type, zone and expression.
func (l *loop) parseSchedule(j *jobSpec) (schedule.Schedule, error) {
	key := j.ScheduleType + "\x00" + j.Timezone + "\x00" + j.Schedule
	if s, ok := l.scheds[key]; ok {
		return s, nil
	}
	s, err := schedule.Parse(j.ScheduleType, j.Schedule, j.Timezone, l.cfg.Location)
	if err != nil {
		return nil, err
	}
	if len(l.scheds) < maxInterned {
		l.scheds[key] = s
	}
	return s, nil
}
