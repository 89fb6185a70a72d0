// Package schedule parses job schedules and computes their fire times.
//
// Parse(scheduleType, expr, tz, loc) returns a Schedule (robfig/cron's
// cron.Schedule): Next(t) is the first fire strictly after t, and the zero
// time means "never again". The schedule types are:
//
//   - "cron" (TypeCron, the default): a cron expression, see below.
//   - "fixed_rate" (TypeFixedRate): "@every 5s", a Go duration ("90s",
//     "1h30m") or a plain number of seconds ("30"); at least 1s and a whole
//     number of seconds. Next(t) is t (truncated to the second) plus the
//     interval, so fires keep a fixed rate when fed the previous scheduled time.
//   - "fixed_delay" (TypeFixedDelay): the same interval syntax, but the next
//     fire is that long after the previous run ENDS. FixedDelay(s) reports the
//     delay so the scheduler can tell; Next(t) returns t+delay so a caller that
//     does not know still gets a sensible time.
//   - "once" (TypeOnce): an RFC 3339 instant ("2026-03-01T09:00:00+01:00"), or a
//     wall-clock time without offset ("2026-03-01 09:00:00") read in the
//     schedule's zone. Next(t) is that instant while t is before it, then zero.
//   - "none" (TypeNone): never fires; runs only by manual or API trigger. The
//     expression is ignored. Next is always zero.
//
// # Cron expressions
//
// One parser reads three dialects:
//
//   - Standard cron, 5 fields "min hour dom month dow" or 6 fields with
//     seconds first "sec min hour dom month dow", with robfig/cron
//     semantics: day-of-week 0-7 where 0 and 7 are Sunday (names SUN-SAT),
//     and when both day-of-month and day-of-week are restricted (neither is
//     "*") a day matches if EITHER matches.
//   - Quartz cron (as in Quartz and xxl-job), 6 or 7 fields
//     "sec min hour dom month dow [year]", with day-of-week 1-7 where 1 is
//     Sunday and 7 Saturday, year 1970-2099, "?" (no value) in one of
//     day-of-month / day-of-week, and the specials "L" (last day of month),
//     "L-3" (third-to-last day), "LW" (last weekday), "L-3W" (weekday nearest
//     the third-to-last day), "15W" (weekday nearest the 15th, staying in the
//     month), "6L" or "FRIL" (last Friday), "L" alone
//     in day-of-week (Saturday) and "6#3" (third Friday). Ranges may wrap
//     ("FRI-MON", "22-2"). For convenience a "*" in one of the two day fields
//     is read as "?" when the other is restricted; restricting both is an error.
//   - Macros: @yearly @annually @monthly @weekly @daily @midnight @hourly and
//     "@every <duration>" (same as fixed_rate).
//
// Both dialects accept lists "1,5", ranges "1-5", steps "*/10", "0/10",
// "5-30/5", and month (JAN-DEC) and day (SUN-SAT) names, case-insensitively.
// Quartz, as Quartz does, refuses a step larger than its field's range
// ("0/60" seconds or minutes, "0/24" hours, "1/32" day-of-month, "1/13"
// month, "1/8" day-of-week), naming the field; standard cron keeps
// robfig/cron's leniency there. Quartz schedules never fire after 2099, with
// or without a year field; standard cron has no such bound.
//
// The rule that tells them apart: an expression is Quartz when it has 7
// fields or contains "?", "L", "W" or "#" (outside month and day names, so
// "JUL" and "WED" do not count); otherwise it is standard cron (5 or 6
// fields). ParseQuartz always uses Quartz semantics (the xxl-job-compatible
// API uses it: xxl-job cron is always Quartz), so there "0 0 12 * * 1" means
// Sunday, where Parse reads it as standard cron: Monday.
//
// An expression that can never match any date (such as "0 0 0 30 2 ?") is
// rejected at parse time with ErrNeverFires. One that only matched in the past
// (a Quartz year field) parses, and its Next is zero. CheckFuture(s, now),
// which saving a job calls, also refuses with ErrNeverFires a schedule with
// no fire after now: a once time in the past, a cron whose years are past,
// or one whose every match falls in a daylight-saving gap of its zone (such
// as "0 30 2 ? 3 1L" in Europe/Berlin).
//
// # Time zones and daylight saving time
//
// Every schedule is evaluated on the wall clock of its time zone: the tz
// argument (an IANA name) or, when that is empty, loc. Fire times are the
// wall-clock times the expression matches, with two rules for DST changes:
//
//   - A wall-clock time that does not exist (spring forward, e.g. 02:30 on the
//     last Sunday of March in Europe/Berlin) is skipped for that day: the job
//     does not run at 03:00 instead, it runs at its next matching time that
//     exists. This keeps "what the expression says" exact and never fires a
//     job at a time it does not name.
//   - A wall-clock time that occurs twice (fall back) fires once, at its first
//     occurrence (the earlier instant, still in summer time). An every-minute
//     job therefore does not run during the repeated hour's second pass.
//
// Interval schedules (fixed_rate, fixed_delay, @every) count elapsed time
// and ignore the wall clock.
//
// Errors name the problem precisely, fit to show a user: the field and value
// (`day-of-week: "8" is out of range 1-7`), or the zone
// (`unknown time zone "Mars/Base"`). ErrUnknownType, ErrUnknownZone and
// ErrNeverFires can be told apart with errors.Is.
package schedule
