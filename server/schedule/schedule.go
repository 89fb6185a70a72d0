package schedule

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule types (a job's schedule_type).
const (
	TypeCron       = "cron"
	TypeFixedRate  = "fixed_rate"
	TypeFixedDelay = "fixed_delay"
	TypeOnce       = "once"
	TypeNone       = "none"
)

// Types lists every schedule type, the default (TypeCron) first.
var Types = []string{TypeCron, TypeFixedRate, TypeFixedDelay, TypeOnce, TypeNone}

// Schedule gives the next fire time strictly after t. A zero time means it
// never fires again. It is robfig/cron's cron.Schedule.
type Schedule = cron.Schedule

// MinEvery is the shortest interval of fixed_rate, fixed_delay and "@every".
const MinEvery = time.Second

// Error kinds, for errors.Is.
var (
	// ErrUnknownType: the schedule type is not one of Types.
	ErrUnknownType = errors.New("unknown schedule type")
	// ErrUnknownZone: the time zone is not a known IANA name.
	ErrUnknownZone = errors.New("unknown time zone")
	// ErrNeverFires: a cron expression matches no date at all.
	ErrNeverFires = errors.New("never fires")
)

// kindError is an error with a user-facing message and a kind for errors.Is.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// ValidType reports whether t is a schedule type ("" counts: it means TypeCron).
func ValidType(t string) bool {
	if t == "" {
		return true
	}
	for _, v := range Types {
		if v == t {
			return true
		}
	}
	return false
}

// LoadZone resolves tz (an IANA name) or, when tz is empty, returns loc
// (time.Local when nil). "Local" is rejected: it means the server's zone,
// which differs between replicas.
func LoadZone(tz string, loc *time.Location) (*time.Location, error) {
	if tz == "" {
		if loc == nil {
			return time.Local, nil
		}
		return loc, nil
	}
	l, err := time.LoadLocation(tz)
	if err != nil || tz == "Local" {
		return nil, &kindError{ErrUnknownZone,
			fmt.Sprintf("unknown time zone %q (use an IANA name such as Europe/Berlin or UTC)", tz)}
	}
	return l, nil
}

// Parse parses expr of the given type ("" means TypeCron) in time zone tz
// (an IANA name; "" means loc, and a nil loc means time.Local). The error
// says what is wrong, fit to show a user. See the package doc for the syntax.
func Parse(scheduleType, expr, tz string, loc *time.Location) (Schedule, error) {
	if !ValidType(scheduleType) {
		return nil, &kindError{ErrUnknownType, fmt.Sprintf("unknown schedule type %q (supported: %s)",
			scheduleType, strings.Join(Types, ", "))}
	}
	loc, err := LoadZone(tz, loc)
	if err != nil {
		return nil, err
	}
	expr = strings.TrimSpace(expr)
	switch scheduleType {
	case TypeNone:
		return noneSchedule{}, nil
	case TypeOnce:
		return parseOnce(expr, loc)
	case TypeFixedRate, TypeFixedDelay:
		d, err := parseInterval(scheduleType, expr)
		if err != nil {
			return nil, err
		}
		if scheduleType == TypeFixedDelay {
			return delaySchedule{d}, nil
		}
		return rateSchedule{d}, nil
	}
	return parseCron(expr, loc)
}

// ParseQuartz parses a Quartz cron expression (6 or 7 fields, day-of-week
// 1 = Sunday) in loc (nil means time.Local), whatever its shape.
func ParseQuartz(expr string, loc *time.Location) (Schedule, error) {
	if loc == nil {
		loc = time.Local
	}
	if err := checkExpr(expr); err != nil {
		return nil, err
	}
	expr = strings.TrimSpace(expr)
	s, err := parseQuartz(strings.Fields(expr), loc)
	return s, cronError(expr, err)
}

// FixedDelay reports whether s is a fixed_delay schedule and its delay: the
// next fire is that long after the previous run ends.
func FixedDelay(s Schedule) (time.Duration, bool) {
	d, ok := s.(delaySchedule)
	return d.delay, ok
}

// FixedRate reports whether s is a fixed_rate or "@every" schedule and its interval.
func FixedRate(s Schedule) (time.Duration, bool) {
	r, ok := s.(rateSchedule)
	return r.every, ok
}

// rateSchedule fires every interval (fixed_rate, "@every").
type rateSchedule struct{ every time.Duration }

// Next is t truncated to the second plus the interval.
func (s rateSchedule) Next(t time.Time) time.Time { return t.Truncate(time.Second).Add(s.every) }

// delaySchedule fires a delay after the previous run ends (fixed_delay).
type delaySchedule struct{ delay time.Duration }

// Next is t plus the delay: right when t is when the previous run ended.
func (s delaySchedule) Next(t time.Time) time.Time { return t.Add(s.delay) }

// onceSchedule fires once, at a fixed instant.
type onceSchedule struct{ at time.Time }

func (s onceSchedule) Next(t time.Time) time.Time {
	if t.Before(s.at) {
		return s.at
	}
	return time.Time{}
}

// noneSchedule never fires.
type noneSchedule struct{}

func (noneSchedule) Next(time.Time) time.Time { return time.Time{} }

// parseInterval reads "@every 5s", "5s" or "5" (seconds) for typ.
func parseInterval(typ, expr string) (time.Duration, error) {
	e := strings.TrimSpace(strings.TrimPrefix(expr, "@every"))
	if e == "" {
		return 0, fmt.Errorf("%s needs an interval such as 30s, 1h30m or a number of seconds", typ)
	}
	var d time.Duration
	if n, err := strconv.ParseInt(e, 10, 64); err == nil {
		if n < 1 {
			return 0, fmt.Errorf("%s: interval %q must be at least 1 second", typ, e)
		}
		if n > math.MaxInt64/int64(time.Second) {
			return 0, fmt.Errorf("%s: interval %q seconds is too long", typ, e)
		}
		d = time.Duration(n) * time.Second
	} else {
		d, err = time.ParseDuration(e)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not a duration (like 30s or 1h30m) or a number of seconds", typ, e)
		}
	}
	if d < MinEvery {
		return 0, fmt.Errorf("%s: interval %s is shorter than %s", typ, d, MinEvery)
	}
	if d%time.Second != 0 {
		return 0, fmt.Errorf("%s: interval %s is not a whole number of seconds", typ, d)
	}
	return d, nil
}

// onceLayouts are wall-clock layouts without offset accepted by "once".
var onceLayouts = []string{"2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02 15:04"}

// parseOnce reads an RFC 3339 instant, or a wall-clock time in loc.
func parseOnce(expr string, loc *time.Location) (Schedule, error) {
	if expr == "" {
		return nil, errors.New("once needs a time such as 2026-03-01T09:00:00+01:00")
	}
	if t, err := time.Parse(time.RFC3339Nano, expr); err == nil {
		return onceSchedule{t}, nil
	}
	for _, l := range onceLayouts {
		if t, err := time.ParseInLocation(l, expr, loc); err == nil {
			return onceSchedule{t}, nil
		}
	}
	return nil, fmt.Errorf("once: %q is not an RFC 3339 time such as 2026-03-01T09:00:00+01:00", expr)
}

// CheckFuture reports, as an ErrNeverFires error, a schedule that parses but
// has no fire after now: a once time that has passed, a cron expression whose
// dates are all past (a Quartz year field), or one whose every match from now
// on falls in a daylight-saving gap of its zone (wall-clock times that do not
// exist there are skipped, see the package doc). Interval and none schedules
// always pass. Saving a job calls it; the scheduler does not, so a stored job
// whose time has passed still loads.
func CheckFuture(s Schedule, now time.Time) error {
	switch v := s.(type) {
	case onceSchedule:
		if !now.Before(v.at) {
			return &kindError{ErrNeverFires, fmt.Sprintf("it never fires: once time %s is in the past", v.at.Format(time.RFC3339))}
		}
	case *cronSchedule:
		if !v.Next(now).IsZero() {
			return nil
		}
		if _, ok := v.nextCivil(civilOf(now.In(v.loc))); ok {
			return &kindError{ErrNeverFires, fmt.Sprintf(
				"it never fires: every time it matches from now on falls in a daylight-saving gap of %s (that wall-clock time does not exist there)", v.loc)}
		}
		return &kindError{ErrNeverFires, "it never fires again: every date it matches is in the past"}
	}
	return nil
}
