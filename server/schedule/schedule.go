// Package schedule parses job schedules and computes next fire times.
//
// Supported today (schedule_type "cron"):
//
//   - standard 5-field cron: "min hour dom month dow"
//   - 6-field cron with seconds first: "sec min hour dom month dow", e.g. "*/1 * * * * *"
//   - descriptors: @yearly @annually @monthly @weekly @daily @midnight @hourly
//   - "@every <duration>" (Go duration, at least 1s), e.g. "@every 5s"
//
// Every schedule is evaluated in the job's time zone.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Types of schedule.
const (
	TypeCron = "cron"
)

// Schedule gives the next fire time strictly after t. A zero time means it
// never fires again. It is robfig/cron's cron.Schedule.
type Schedule = cron.Schedule

// MinEvery is the shortest "@every" interval.
const MinEvery = time.Second

var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom |
	cron.Month | cron.Dow | cron.Descriptor)

// Parse parses expr of the given type in time zone tz (an IANA name; ""
// means loc). The error says what is wrong, fit to show a user.
func Parse(scheduleType, expr, tz string, loc *time.Location) (Schedule, error) {
	if scheduleType == "" {
		scheduleType = TypeCron
	}
	if scheduleType != TypeCron {
		return nil, fmt.Errorf("unknown schedule type %q (supported: cron)", scheduleType)
	}
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return nil, fmt.Errorf("unknown time zone %q", tz)
		}
		loc = l
	}
	if loc == nil {
		loc = time.Local
	}
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return nil, errors.New("schedule is empty")
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, errors.New("put the time zone in the timezone field, not in the schedule")
	}
	if rest, ok := strings.CutPrefix(expr, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("@every needs a duration like 5s or 1m30s: %w", err)
		}
		if d < MinEvery {
			return nil, fmt.Errorf("@every interval %s is shorter than %s", d, MinEvery)
		}
	}
	s, err := parser.Parse("CRON_TZ=" + loc.String() + " " + expr)
	if err != nil {
		return nil, fmt.Errorf("invalid cron expression %q: %s", expr, strings.TrimPrefix(err.Error(), "CRON_TZ="))
	}
	if _, ok := s.(cron.ConstantDelaySchedule); !ok && s.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("cron expression %q never fires", expr)
	}
	return s, nil
}
