package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// fieldDef describes one numeric cron field.
type fieldDef struct {
	name     string
	min, max int
	// starMax is the top of "*" and of "a/step" ("0" means max); standard
	// day-of-week accepts 7 (Sunday) but "*" stops at 6.
	starMax int
	names   map[string]int
	// wrap allows ranges that wrap around ("FRI-MON", "22-2"): Quartz only.
	wrap bool
}

var (
	monthNames = map[string]int{"JAN": 1, "FEB": 2, "MAR": 3, "APR": 4, "MAY": 5, "JUN": 6,
		"JUL": 7, "AUG": 8, "SEP": 9, "OCT": 10, "NOV": 11, "DEC": 12}
	stdDayNames     = map[string]int{"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
	quartzDayNames  = map[string]int{"SUN": 1, "MON": 2, "TUE": 3, "WED": 4, "THU": 5, "FRI": 6, "SAT": 7}
	secondField     = fieldDef{name: "second", min: 0, max: 59}
	minuteField     = fieldDef{name: "minute", min: 0, max: 59}
	hourField       = fieldDef{name: "hour", min: 0, max: 23}
	domField        = fieldDef{name: "day-of-month", min: 1, max: 31}
	monthField      = fieldDef{name: "month", min: 1, max: 12, names: monthNames}
	stdDowField     = fieldDef{name: "day-of-week", min: 0, max: 7, starMax: 6, names: stdDayNames}
	quartzDowField  = fieldDef{name: "day-of-week", min: 1, max: 7, names: quartzDayNames, wrap: true}
	quartzYearField = fieldDef{name: "year", min: minYear, max: maxYear}
)

// Quartz's year range.
const (
	minYear = 1970
	maxYear = 2099
)

// macros are the @descriptors, as standard 6-field cron.
var macros = map[string]string{
	"@yearly":   "0 0 0 1 1 *",
	"@annually": "0 0 0 1 1 *",
	"@monthly":  "0 0 0 1 * *",
	"@weekly":   "0 0 0 * * 0",
	"@daily":    "0 0 0 * * *",
	"@midnight": "0 0 0 * * *",
	"@hourly":   "0 0 * * * *",
}

// checkExpr rejects an empty expression and an embedded zone prefix.
func checkExpr(expr string) error {
	expr = strings.TrimSpace(expr)
	if expr == "" {
		return errors.New("schedule is empty")
	}
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return errors.New("put the time zone in the timezone field, not in the schedule")
	}
	return nil
}

// parseCron reads any cron dialect (see the package doc for the rule).
// Syntax errors say `invalid cron expression "<expr>": <field problem>`.
func parseCron(expr string, loc *time.Location) (Schedule, error) {
	if err := checkExpr(expr); err != nil {
		return nil, err
	}
	s, err := parseCronDialect(expr, loc)
	return s, cronError(expr, err)
}

// cronError prefixes err with the expression, keeping its kind.
func cronError(expr string, err error) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf("invalid cron expression %q: %s", expr, err)
	var ke *kindError
	if errors.As(err, &ke) {
		return &kindError{ke.kind, msg}
	}
	return errors.New(msg)
}

func parseCronDialect(expr string, loc *time.Location) (Schedule, error) {
	if strings.HasPrefix(expr, "@") {
		if rest, ok := strings.CutPrefix(expr, "@every"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			d, err := parseInterval("@every", rest)
			if err != nil {
				return nil, err
			}
			return rateSchedule{d}, nil
		}
		std, ok := macros[strings.ToLower(expr)]
		if !ok {
			return nil, fmt.Errorf("unknown macro %q (use @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>)", expr)
		}
		return parseStandard(strings.Fields(std), loc)
	}
	fields := strings.Fields(expr)
	if isQuartz(fields) {
		return parseQuartz(fields, loc)
	}
	return parseStandard(fields, loc)
}

// isQuartz is the dialect rule: 7 fields, or "?", "L", "W" or "#" outside
// month and day names.
func isQuartz(fields []string) bool {
	if len(fields) == 7 {
		return true
	}
	for _, f := range fields {
		u := strings.ToUpper(f)
		for name := range monthNames {
			u = strings.ReplaceAll(u, name, "")
		}
		for name := range stdDayNames {
			u = strings.ReplaceAll(u, name, "")
		}
		if strings.ContainsAny(u, "?LW#") {
			return true
		}
	}
	return false
}

// parseStandard reads 5- or 6-field cron with robfig/cron semantics.
func parseStandard(fields []string, loc *time.Location) (Schedule, error) {
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
	case 6:
	default:
		return nil, fmt.Errorf("cron expression has %d fields; expected 5 (minute hour day-of-month month day-of-week), 6 (second first) or Quartz 6-7 (second ... day-of-week [year])", len(fields))
	}
	c := &cronSchedule{loc: loc}
	var err error
	if c.sec, _, err = parseList(secondField, fields[0]); err != nil {
		return nil, err
	}
	if c.min, _, err = parseList(minuteField, fields[1]); err != nil {
		return nil, err
	}
	if c.hour, _, err = parseList(hourField, fields[2]); err != nil {
		return nil, err
	}
	var domStar, dowStar bool
	if c.dom.days, domStar, err = parseList(domField, fields[3]); err != nil {
		return nil, err
	}
	if c.month, _, err = parseList(monthField, fields[4]); err != nil {
		return nil, err
	}
	var dow uint64
	if dow, dowStar, err = parseList(stdDowField, fields[5]); err != nil {
		return nil, err
	}
	if dow&(1<<7) != 0 { // 7 is Sunday too
		dow |= 1
	}
	c.dow.days = uint8(dow & 0x7f)
	// robfig: a "*" day field leaves the other in charge; both restricted = OR.
	c.dom.any, c.dow.any = domStar, dowStar
	c.or = !domStar && !dowStar
	return c.checkFires()
}

// parseQuartz reads 6- or 7-field Quartz cron.
func parseQuartz(fields []string, loc *time.Location) (Schedule, error) {
	if len(fields) != 6 && len(fields) != 7 {
		return nil, fmt.Errorf("expected 6 or 7 fields for Quartz cron (second minute hour day-of-month month day-of-week [year]), found %d", len(fields))
	}
	c := &cronSchedule{loc: loc, quartz: true}
	var err error
	if c.sec, _, err = parseList(withWrap(secondField), fields[0]); err != nil {
		return nil, err
	}
	if c.min, _, err = parseList(withWrap(minuteField), fields[1]); err != nil {
		return nil, err
	}
	if c.hour, _, err = parseList(withWrap(hourField), fields[2]); err != nil {
		return nil, err
	}
	if c.month, _, err = parseList(withWrap(monthField), fields[4]); err != nil {
		return nil, err
	}
	dom, dow := fields[3], fields[5]
	domQ, dowQ := dom == "?", dow == "?"
	switch {
	case domQ && dowQ:
		return nil, errors.New(`day-of-month and day-of-week: only one of them may be "?"`)
	case !domQ && !dowQ:
		// Leniency: "*" in one day field reads as "?" when the other is set.
		switch {
		case dom == "*":
			domQ = true
		case dow == "*":
			dowQ = true
		default:
			return nil, fmt.Errorf(`day-of-month %q and day-of-week %q: Quartz cannot restrict both; put "?" in one of them`, dom, dow)
		}
	}
	if domQ {
		c.dom.any = true
	} else if c.dom, err = parseQuartzDom(dom); err != nil {
		return nil, err
	}
	if dowQ {
		c.dow.any = true
	} else if c.dow, err = parseQuartzDow(dow); err != nil {
		return nil, err
	}
	if len(fields) == 7 && fields[6] != "*" && fields[6] != "?" {
		bits, _, err := parseYears(fields[6])
		if err != nil {
			return nil, err
		}
		c.years = bits
	}
	return c.checkFires()
}

func withWrap(f fieldDef) fieldDef {
	f.wrap = true
	return f
}

// parseQuartzDom reads a Quartz day-of-month field: numbers, ranges, steps,
// "L", "L-n", "LW", "L-nW", "nW".
func parseQuartzDom(s string) (daySpec, error) {
	var d daySpec
	for _, item := range strings.Split(s, ",") {
		up := strings.ToUpper(item)
		switch {
		case up == "L":
			d.lastOffsets = append(d.lastOffsets, 0)
		case up == "LW":
			d.lastWeekday = true
		case strings.HasPrefix(up, "L-"):
			num, weekday := strings.CutSuffix(up[2:], "W")
			n, err := strconv.Atoi(num)
			if err != nil || n < 0 || n > 30 {
				return d, fmt.Errorf("day-of-month: %q: the offset after L- must be a number from 0 to 30", item)
			}
			if weekday {
				d.lastOffsetWeekdays = append(d.lastOffsetWeekdays, n)
			} else {
				d.lastOffsets = append(d.lastOffsets, n)
			}
		case strings.HasSuffix(up, "W"):
			n, err := strconv.Atoi(up[:len(up)-1])
			if err != nil || n < 1 || n > 31 {
				return d, fmt.Errorf("day-of-month: %q: W needs a single day from 1 to 31 before it (like 15W) or L (LW)", item)
			}
			d.nearest = append(d.nearest, n)
		case strings.Contains(up, "L"):
			return d, fmt.Errorf("day-of-month: %q: L must stand alone, as L-n or as LW", item)
		default:
			bits, _, err := parseItem(withWrap(domField), item, s)
			if err != nil {
				return d, err
			}
			d.days |= bits
		}
	}
	return d, nil
}

// parseQuartzDow reads a Quartz day-of-week field (1 = Sunday): numbers,
// names, ranges, steps, "L" (Saturday), "nL" (last n-day), "n#k" (k-th n-day).
func parseQuartzDow(s string) (dowSpec, error) {
	var d dowSpec
	for _, item := range strings.Split(s, ",") {
		up := strings.ToUpper(item)
		switch {
		case up == "L":
			d.days |= 1 << time.Saturday
		case strings.Contains(up, "#"):
			a, b, _ := strings.Cut(up, "#")
			wd, err := fieldValue(quartzDowField, a, item)
			if err != nil {
				return d, err
			}
			k, err := strconv.Atoi(b)
			if err != nil || k < 1 || k > 5 {
				return d, fmt.Errorf("day-of-week: %q: the number after # must be from 1 to 5", item)
			}
			d.nth = append(d.nth, nthDay{time.Weekday(wd - 1), k})
		case strings.HasSuffix(up, "L"):
			wd, err := fieldValue(quartzDowField, up[:len(up)-1], item)
			if err != nil {
				return d, err
			}
			d.last = append(d.last, time.Weekday(wd-1))
		case strings.ContainsAny(strings.ReplaceAll(up, "WED", ""), "LW"):
			return d, fmt.Errorf("day-of-week: %q: L must follow a single day (like 6L or FRIL); W is day-of-month only", item)
		default:
			bits, _, err := parseItem(quartzDowField, item, s)
			if err != nil {
				return d, err
			}
			d.days |= uint8(bits >> 1) // Quartz 1..7 -> Weekday 0..6
		}
	}
	return d, nil
}

// parseYears reads a Quartz year field into a bitset over minYear..maxYear.
func parseYears(s string) ([]bool, bool, error) {
	years := make([]bool, maxYear-minYear+1)
	star := false
	for _, item := range strings.Split(s, ",") {
		lo, hi, step, st, err := parseRange(quartzYearField, item, s)
		if err != nil {
			return nil, false, err
		}
		star = star || st
		if lo > hi {
			return nil, false, fmt.Errorf("year: range %q: %d is after %d", item, lo, hi)
		}
		for y := lo; y <= hi; y += step {
			years[y-minYear] = true
		}
	}
	return years, star, nil
}

// parseList reads a comma-separated field into a bitset; star reports a
// "*" (or "*/1") item, which robfig semantics care about for day fields.
func parseList(f fieldDef, s string) (uint64, bool, error) {
	var bits uint64
	star := false
	for _, item := range strings.Split(s, ",") {
		b, st, err := parseItem(f, item, s)
		if err != nil {
			return 0, false, err
		}
		bits |= b
		star = star || st
	}
	return bits, star, nil
}

// parseItem reads one list item: "*", "n", "a-b", each with an optional "/step".
func parseItem(f fieldDef, item, whole string) (uint64, bool, error) {
	lo, hi, step, star, err := parseRange(f, item, whole)
	if err != nil {
		return 0, false, err
	}
	var bits uint64
	if lo <= hi {
		for v := lo; v <= hi; v += step {
			bits |= 1 << uint(v)
		}
		return bits, star, nil
	}
	if !f.wrap {
		return 0, false, fmt.Errorf("%s: range %q: %d is after %d", f.name, item, lo, hi)
	}
	// Wrapping range: lo..max then min..hi, the step running across the wrap.
	n := (f.max - lo + 1) + (hi - f.min + 1)
	for i := 0; i < n; i += step {
		v := lo + i
		if v > f.max {
			v = v - f.max - 1 + f.min
		}
		bits |= 1 << uint(v)
	}
	return bits, false, nil
}

// parseRange reads "*", "n", "a-b" with an optional "/step" into bounds.
func parseRange(f fieldDef, item, whole string) (lo, hi, step int, star bool, err error) {
	if item == "" {
		return 0, 0, 0, false, fmt.Errorf("%s: empty list item in %q", f.name, whole)
	}
	starMax := f.starMax
	if starMax == 0 {
		starMax = f.max
	}
	rng, stepStr, hasStep := strings.Cut(item, "/")
	step = 1
	if hasStep {
		step, err = strconv.Atoi(stepStr)
		if err != nil || step < 1 {
			return 0, 0, 0, false, fmt.Errorf("%s: step %q in %q must be a whole number of at least 1", f.name, stepStr, item)
		}
		// Quartz refuses a step beyond the field's range ("0/60" seconds,
		// "0/24" hours, "1/13" months): it could only ever match the start.
		// (Only Quartz fields wrap; standard cron keeps robfig's leniency.)
		if f.wrap && step > f.max {
			return 0, 0, 0, false, fmt.Errorf("%s: step %d in %q is larger than the field allows (at most %d)", f.name, step, item, f.max)
		}
	}
	switch {
	case rng == "*":
		return f.min, starMax, step, step == 1, nil
	case strings.Contains(rng, "-"):
		a, b, _ := strings.Cut(rng, "-")
		if lo, err = fieldValue(f, a, item); err != nil {
			return 0, 0, 0, false, err
		}
		if hi, err = fieldValue(f, b, item); err != nil {
			return 0, 0, 0, false, err
		}
		return lo, hi, step, false, nil
	default:
		if lo, err = fieldValue(f, rng, item); err != nil {
			return 0, 0, 0, false, err
		}
		if hasStep {
			return lo, max(lo, starMax), step, false, nil
		}
		return lo, lo, 1, false, nil
	}
}

// fieldValue reads one number or name of field f, in range.
func fieldValue(f fieldDef, s, item string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("%s: %q is missing a number", f.name, item)
	}
	if v, ok := f.names[strings.ToUpper(s)]; ok {
		return v, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		if len(f.names) > 0 {
			return 0, fmt.Errorf("%s: %q is not a number or a name", f.name, s)
		}
		return 0, fmt.Errorf("%s: %q is not a number", f.name, s)
	}
	if v < f.min || v > f.max {
		return 0, fmt.Errorf("%s: %q is out of range %d-%d", f.name, s, f.min, f.max)
	}
	return v, nil
}
