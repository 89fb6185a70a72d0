package scheduler

import (
	"github.com/cronix/cronix/server/schedule"
	"github.com/cronix/cronix/server/store"
)

// Memory per enabled job: the loop keeps one entry per job for the whole
// term, so a leader with 100,000 jobs holds 100,000 of them. An entry keeps
// only the fields the trigger loop, routing and placement read; strings
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

// slim clears the fields of j the loop never reads (description, author,
// alarm addresses, child jobs, timestamps) and interns the shared strings.
// Child jobs are fired by the results API, which reads the job from the store.
func (l *loop) slim(j *store.Job) {
	j.Description, j.Author = "", ""
	j.AlarmEmails, j.ChildJobIDs = nil, nil
	j.CreatedAt, j.UpdatedAt = j.CreatedAt.UTC(), j.UpdatedAt.UTC()
	j.Group = l.intern(j.Group)
	j.ScheduleType = l.intern(j.ScheduleType)
	j.Schedule = l.intern(j.Schedule)
	j.Timezone = l.intern(j.Timezone)
	j.Handler = l.intern(j.Handler)
	j.RouteStrategy = l.intern(j.RouteStrategy)
	j.BlockStrategy = l.intern(j.BlockStrategy)
	j.MisfirePolicy = l.intern(j.MisfirePolicy)
	j.NodeUUID = l.intern(j.NodeUUID)
	if len(j.Params) <= maxInternedParams {
		if p, ok := l.params[string(j.Params)]; ok {
			j.Params = p
		} else if len(l.params) < maxInterned {
			l.params[string(j.Params)] = j.Params
		}
	}
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
func (l *loop) parseSchedule(j *store.Job) (schedule.Schedule, error) {
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
