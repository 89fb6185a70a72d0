package schedule

import (
	"math/bits"
	"time"
)

// cronSchedule is a parsed cron expression (any dialect): bitsets per field
// plus the day-of-month / day-of-week rules, evaluated on the wall clock of loc.
type cronSchedule struct {
	loc            *time.Location
	sec, min, hour uint64 // bit n = value n
	month          uint64 // bits 1..12
	years          []bool // index year-minYear; nil = every year
	dom            daySpec
	dow            dowSpec
	or             bool // standard cron with both day fields restricted: either matches
	// quartz bounds the search at maxYear, as Quartz does even without a
	// year field.
	quartz bool
}

// daySpec is a day-of-month field.
type daySpec struct {
	any         bool
	days        uint64 // bits 1..31
	lastOffsets []int  // "L" (0) and "L-n": the day dim-n
	lastWeekday bool   // "LW"
	// lastOffsetWeekdays are "L-nW": the weekday nearest the day dim-n.
	lastOffsetWeekdays []int
	nearest            []int // "nW": the weekday nearest day n
}

// dowSpec is a day-of-week field.
type dowSpec struct {
	any  bool
	days uint8          // bit time.Weekday
	last []time.Weekday // "nL": the last such weekday of the month
	nth  []nthDay       // "n#k"
}

type nthDay struct {
	wd time.Weekday
	k  int
}

// searchYears bounds the search when no year field limits it: the Gregorian
// calendar repeats every 400 years, so nothing found in 400 years never comes.
const searchYears = 400

// maxSteps bounds the candidates Next tries (each DST-skipped wall time is
// one); far above the 3600 of an every-second job across a one-hour change.
const maxSteps = 100_000

// civil is a wall-clock time.
type civil struct {
	y       int
	m       time.Month
	d       int
	h, i, s int
}

func civilOf(t time.Time) civil {
	y, m, d := t.Date()
	h, i, s := t.Clock()
	return civil{y, m, d, h, i, s}
}

// utc is the civil time read as UTC (seconds since the epoch).
func (c civil) utc() int64 {
	return time.Date(c.y, c.m, c.d, c.h, c.i, c.s, 0, time.UTC).Unix()
}

// plusSecond is the civil time one second later.
func (c civil) plusSecond() civil {
	return civilOf(time.Date(c.y, c.m, c.d, c.h, c.i, c.s+1, 0, time.UTC))
}

// Next returns the first fire strictly after t, or zero if none. Each
// wall-clock time the expression matches fires at its first occurrence;
// wall times that do not exist (DST gap) are skipped.
func (c *cronSchedule) Next(t time.Time) time.Time {
	from := civilOf(t.In(c.loc).Truncate(time.Second).Add(time.Second))
	for range maxSteps {
		n, ok := c.nextCivil(from)
		if !ok {
			return time.Time{}
		}
		at, ok := c.resolve(n)
		if ok && at.After(t) {
			return at
		}
		from = n.plusSecond()
		if !ok {
			// In a DST gap: resume where the gap ends.
			if end := c.gapEnd(n); end.utc() > from.utc() {
				from = end
			}
		}
	}
	return time.Time{}
}

// resolve maps a wall-clock time to its first occurrence in loc; false if
// it does not exist (DST gap).
func (c *cronSchedule) resolve(n civil) (time.Time, bool) {
	u := n.utc()
	var best int64
	found := false
	// The offsets around u; a zone changes offset at most once in two days.
	for _, probe := range [3]int64{u - 86400, u, u + 86400} {
		off := c.offsetAt(probe)
		i := u - int64(off)
		if c.offsetAt(i) != off {
			continue
		}
		if !found || i < best {
			best, found = i, true
		}
	}
	if !found {
		return time.Time{}, false
	}
	return time.Unix(best, 0).In(c.loc), true
}

// gapEnd is the first wall-clock time after the DST gap that swallows n:
// the wall clock when the offset in effect after n began.
func (c *cronSchedule) gapEnd(n civil) civil {
	u := n.utc()
	after := time.Unix(u-int64(c.offsetAt(u-86400)), 0).In(c.loc)
	start, _ := after.ZoneBounds()
	if start.IsZero() {
		return n
	}
	return civilOf(start.In(c.loc))
}

func (c *cronSchedule) offsetAt(unix int64) int {
	_, off := time.Unix(unix, 0).In(c.loc).Zone()
	return off
}

// nextCivil is the first matching wall-clock time at or after from.
func (c *cronSchedule) nextCivil(from civil) (civil, bool) {
	lastYear := from.y + searchYears
	if c.years != nil || c.quartz {
		lastYear = min(lastYear, maxYear)
	}
	y, m, d := from.y, from.m, from.d
	sameDay := true // still on from's date: time of day starts at from's
	for ; y <= lastYear; y, m, d = y+1, time.January, 1 {
		if c.years != nil && (y < minYear || !c.years[y-minYear]) {
			sameDay = false
			continue
		}
		for ; m <= time.December; m, d = m+1, 1 {
			if c.month&(1<<uint(m)) == 0 {
				sameDay = false
				continue
			}
			dim := daysIn(y, m)
			wd1 := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Weekday()
			for ; d <= dim; d++ {
				if c.dayMatches(d, dim, wd1) {
					h, i, s := 0, 0, 0
					if sameDay {
						h, i, s = from.h, from.i, from.s
					}
					if hh, ii, ss, ok := c.timeFrom(h, i, s); ok {
						return civil{y, m, d, hh, ii, ss}, true
					}
				}
				sameDay = false
			}
		}
	}
	return civil{}, false
}

// timeFrom is the first matching time of day at or after h:i:s.
func (c *cronSchedule) timeFrom(h, i, s int) (int, int, int, bool) {
	for hh := nextBit(c.hour, h); hh >= 0 && hh < 24; hh = nextBit(c.hour, hh+1) {
		i0 := 0
		if hh == h {
			i0 = i
		}
		for ii := nextBit(c.min, i0); ii >= 0 && ii < 60; ii = nextBit(c.min, ii+1) {
			s0 := 0
			if hh == h && ii == i {
				s0 = s
			}
			if ss := nextBit(c.sec, s0); ss >= 0 && ss < 60 {
				return hh, ii, ss, true
			}
		}
	}
	return 0, 0, 0, false
}

// nextBit is the lowest set bit of b at or above n, or -1.
func nextBit(b uint64, n int) int {
	if n >= 64 {
		return -1
	}
	b = b >> uint(n) << uint(n)
	if b == 0 {
		return -1
	}
	return bits.TrailingZeros64(b)
}

func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// dayMatches reports whether day d of a month of dim days whose first day
// is a wd1 matches the day fields.
func (c *cronSchedule) dayMatches(d, dim int, wd1 time.Weekday) bool {
	dom := c.dom.matches(d, dim, wd1)
	dow := c.dow.matches(d, dim, wd1)
	if c.or {
		return dom || dow
	}
	return dom && dow
}

func (s *daySpec) matches(d, dim int, wd1 time.Weekday) bool {
	if s.any || s.days&(1<<uint(d)) != 0 {
		return true
	}
	for _, off := range s.lastOffsets {
		if d == dim-off {
			return true
		}
	}
	if s.lastWeekday && d == nearestWeekday(dim, dim, wd1) {
		return true
	}
	for _, off := range s.lastOffsetWeekdays {
		if n := dim - off; n >= 1 && d == nearestWeekday(n, dim, wd1) {
			return true
		}
	}
	for _, n := range s.nearest {
		if n <= dim && d == nearestWeekday(n, dim, wd1) {
			return true
		}
	}
	return false
}

// nearestWeekday is Quartz's "nW": the Monday-Friday day nearest day n,
// staying inside the month.
func nearestWeekday(n, dim int, wd1 time.Weekday) int {
	switch weekdayOf(n, wd1) {
	case time.Saturday:
		if n == 1 {
			return 3 // Monday the 3rd
		}
		return n - 1
	case time.Sunday:
		if n == dim {
			return n - 2 // Friday
		}
		return n + 1
	}
	return n
}

func weekdayOf(d int, wd1 time.Weekday) time.Weekday {
	return time.Weekday((int(wd1) + d - 1) % 7)
}

func (s *dowSpec) matches(d, dim int, wd1 time.Weekday) bool {
	if s.any {
		return true
	}
	wd := weekdayOf(d, wd1)
	if s.days&(1<<uint(wd)) != 0 {
		return true
	}
	for _, l := range s.last {
		if wd == l && d+7 > dim {
			return true
		}
	}
	for _, n := range s.nth {
		if wd == n.wd && (d-1)/7+1 == n.k {
			return true
		}
	}
	return false
}

// checkFires rejects an expression that matches no date at all: it looks
// for any match from the first possible year, zone aside.
func (c *cronSchedule) checkFires() (Schedule, error) {
	start := civil{y: minYear, m: time.January, d: 1}
	if _, ok := c.nextCivil(start); !ok {
		return nil, &kindError{ErrNeverFires, "it never fires: no date matches it"}
	}
	return c, nil
}
