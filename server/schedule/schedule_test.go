package schedule

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"
)

// base is a Sunday, 10:00 UTC; the default "from" of the table.
const base = "2026-03-01T10:00:00Z"

// nextCase: parse expr (type typ, "" = cron) in tz ("" = UTC), then call
// Next repeatedly from "from" ("" = base); want lists the successive fires
// as RFC 3339 in tz, "" meaning zero (never again).
type nextCase struct {
	typ, expr, tz, from string
	want                []string
}

func w(s ...string) []string { return s }

var nextCases = []nextCase{
	// ---- Quartz: seconds, steps, lists, ranges ----
	{"", "0/10 * * * * ? *", "", "", w("2026-03-01T10:00:10Z", "2026-03-01T10:00:20Z", "2026-03-01T10:00:30Z")},
	{"", "0/10 * * * * ?", "", "", w("2026-03-01T10:00:10Z", "2026-03-01T10:00:20Z")},
	{"", "*/10 * * * * ?", "", "", w("2026-03-01T10:00:10Z", "2026-03-01T10:00:20Z")},
	{"", "5/15 * * * * ?", "", "", w("2026-03-01T10:00:05Z", "2026-03-01T10:00:20Z", "2026-03-01T10:00:35Z", "2026-03-01T10:00:50Z", "2026-03-01T10:01:05Z")},
	{"", "* * * * * ?", "", "", w("2026-03-01T10:00:01Z", "2026-03-01T10:00:02Z")},
	{"", "* * * * * ?", "", "2026-03-01T10:00:00.5Z", w("2026-03-01T10:00:01Z", "2026-03-01T10:00:02Z")},
	{"", "0 0/15 * * * ?", "", "", w("2026-03-01T10:15:00Z", "2026-03-01T10:30:00Z", "2026-03-01T10:45:00Z", "2026-03-01T11:00:00Z")},
	{"", "0 0 12 * * ?", "", "", w("2026-03-01T12:00:00Z", "2026-03-02T12:00:00Z")},
	{"", "0 0 10 * * ?", "", "", w("2026-03-02T10:00:00Z")},
	{"", "0 15 10 ? * *", "", "", w("2026-03-01T10:15:00Z", "2026-03-02T10:15:00Z")},
	{"", "0 15 10 * * ? *", "", "", w("2026-03-01T10:15:00Z", "2026-03-02T10:15:00Z")},
	{"", "0 15 10 * * ? 2026", "", "2026-12-31T11:00:00Z", w("")},
	{"", "0 15 10 * * ? 2027", "", "", w("2027-01-01T10:15:00Z", "2027-01-02T10:15:00Z")},
	{"", "0 * 14 * * ?", "", "", w("2026-03-01T14:00:00Z", "2026-03-01T14:01:00Z")},
	{"", "0 0/5 14,18 * * ?", "", "2026-03-01T14:50:00Z", w("2026-03-01T14:55:00Z", "2026-03-01T18:00:00Z", "2026-03-01T18:05:00Z")},
	{"", "0 0-5 14 * * ?", "", "2026-03-01T14:04:30Z", w("2026-03-01T14:05:00Z", "2026-03-02T14:00:00Z")},
	{"", "0 5-30/5 * * * ?", "", "", w("2026-03-01T10:05:00Z", "2026-03-01T10:10:00Z")},
	{"", "0 5-30/5 * * * ?", "", "2026-03-01T10:29:00Z", w("2026-03-01T10:30:00Z", "2026-03-01T11:05:00Z")},
	{"", "0 10,44 14 ? 3 WED", "", "", w("2026-03-04T14:10:00Z", "2026-03-04T14:44:00Z", "2026-03-11T14:10:00Z")},
	{"", "0 15 10 ? * MON-FRI", "", "", w("2026-03-02T10:15:00Z", "2026-03-03T10:15:00Z", "2026-03-04T10:15:00Z")},
	{"", "0 15 10 ? * MON-FRI", "", "2026-03-06T11:00:00Z", w("2026-03-09T10:15:00Z")},
	{"", "0 15 10 ? * 2-6", "", "2026-03-06T11:00:00Z", w("2026-03-09T10:15:00Z")},
	{"", "0 15 10 15 * ?", "", "", w("2026-03-15T10:15:00Z", "2026-04-15T10:15:00Z", "2026-05-15T10:15:00Z")},
	{"", "0 11 11 11 11 ?", "", "", w("2026-11-11T11:11:00Z", "2027-11-11T11:11:00Z")},
	{"", "0 0 12 1/5 * ?", "", "", w("2026-03-01T12:00:00Z", "2026-03-06T12:00:00Z", "2026-03-11T12:00:00Z")},
	{"", "0 0 12 1/5 * ?", "", "2026-03-30T00:00:00Z", w("2026-03-31T12:00:00Z", "2026-04-01T12:00:00Z")},
	{"", "0 0 12 ? * 2-6/2", "", "", w("2026-03-02T12:00:00Z", "2026-03-04T12:00:00Z", "2026-03-06T12:00:00Z", "2026-03-09T12:00:00Z")},
	{"", "0 0 12 ? * 6#3 *", "", "", w("2026-03-20T12:00:00Z")},
	// Quartz day-of-week numbering: 1 = Sunday, 7 = Saturday.
	{"", "0 0 8 ? * 1", "", "", w("2026-03-08T08:00:00Z", "2026-03-15T08:00:00Z")},
	{"", "0 0 8 ? * SUN", "", "", w("2026-03-08T08:00:00Z")},
	{"", "0 0 8 ? * 7", "", "", w("2026-03-07T08:00:00Z", "2026-03-14T08:00:00Z")},
	{"", "0 0 8 ? * 2,4,6", "", "", w("2026-03-02T08:00:00Z", "2026-03-04T08:00:00Z", "2026-03-06T08:00:00Z", "2026-03-09T08:00:00Z")},
	{"", "0 0 8 ? * L", "", "", w("2026-03-07T08:00:00Z", "2026-03-14T08:00:00Z", "2026-03-21T08:00:00Z")},
	// Wrapping ranges.
	{"", "0 0 8 ? * FRI-MON", "", "", w("2026-03-02T08:00:00Z", "2026-03-06T08:00:00Z", "2026-03-07T08:00:00Z", "2026-03-08T08:00:00Z", "2026-03-09T08:00:00Z")},
	{"", "0 0 8 ? * 6-2", "", "", w("2026-03-02T08:00:00Z", "2026-03-06T08:00:00Z")},
	{"", "0 0 22-2 * * ?", "", "", w("2026-03-01T22:00:00Z", "2026-03-01T23:00:00Z", "2026-03-02T00:00:00Z", "2026-03-02T01:00:00Z", "2026-03-02T02:00:00Z", "2026-03-02T22:00:00Z")},
	{"", "0 0 22-4/3 * * ?", "", "", w("2026-03-01T22:00:00Z", "2026-03-02T01:00:00Z", "2026-03-02T04:00:00Z", "2026-03-02T22:00:00Z")},
	{"", "0 50-10/10 * * * ?", "", "", w("2026-03-01T10:10:00Z", "2026-03-01T10:50:00Z", "2026-03-01T11:00:00Z")},
	{"", "0 0 0 1 NOV-FEB ?", "", "", w("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z", "2027-11-01T00:00:00Z")},
	{"", "0 0 0 1 JAN-MAR ?", "", "", w("2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z", "2027-03-01T00:00:00Z", "2028-01-01T00:00:00Z")},
	{"", "0 0 0 1 1,7 ?", "", "", w("2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z")},
	// L: last day, L-n: n days before it.
	{"", "0 15 10 L * ?", "", "", w("2026-03-31T10:15:00Z", "2026-04-30T10:15:00Z", "2026-05-31T10:15:00Z")},
	{"", "0 15 10 L-0 * ?", "", "", w("2026-03-31T10:15:00Z")},
	{"", "0 15 10 L-2 * ?", "", "", w("2026-03-29T10:15:00Z", "2026-04-28T10:15:00Z", "2026-05-29T10:15:00Z")},
	{"", "0 0 0 L-30 * ?", "", "", w("2026-05-01T00:00:00Z", "2026-07-01T00:00:00Z")},
	{"", "0 0 0 L 2 ?", "", "", w("2027-02-28T00:00:00Z", "2028-02-29T00:00:00Z", "2029-02-28T00:00:00Z")},
	{"", "0 0 0 1,L * ?", "", "", w("2026-03-31T00:00:00Z", "2026-04-01T00:00:00Z", "2026-04-30T00:00:00Z")},
	// W: nearest weekday; LW: last weekday.
	{"", "0 0 0 LW * ?", "", "", w("2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z", "2026-05-29T00:00:00Z", "2026-06-30T00:00:00Z")},
	{"", "0 0 0 lw * ?", "", "2026-10-01T00:00:00Z", w("2026-10-30T00:00:00Z", "2026-11-30T00:00:00Z")},
	{"", "0 0 0 15W * ?", "", "", w("2026-03-16T00:00:00Z", "2026-04-15T00:00:00Z", "2026-05-15T00:00:00Z")},
	{"", "0 0 0 15W * ?", "", "2026-08-01T00:00:00Z", w("2026-08-14T00:00:00Z", "2026-09-15T00:00:00Z")},
	{"", "0 0 0 1W * ?", "", "", w("2026-03-02T00:00:00Z", "2026-04-01T00:00:00Z", "2026-05-01T00:00:00Z")},
	{"", "0 0 0 1W * ?", "", "2026-07-15T00:00:00Z", w("2026-08-03T00:00:00Z", "2026-09-01T00:00:00Z")},
	{"", "0 0 0 31W * ?", "", "", w("2026-03-31T00:00:00Z", "2026-05-29T00:00:00Z", "2026-07-31T00:00:00Z")},
	{"", "0 0 0 30W * ?", "", "2026-11-01T00:00:00Z", w("2026-11-30T00:00:00Z", "2026-12-30T00:00:00Z")},
	// nL: last such weekday; FRIL = 6L.
	{"", "0 15 10 ? * 6L", "", "", w("2026-03-27T10:15:00Z", "2026-04-24T10:15:00Z", "2026-05-29T10:15:00Z")},
	{"", "0 15 10 ? * FRIL", "", "", w("2026-03-27T10:15:00Z", "2026-04-24T10:15:00Z")},
	{"", "0 15 10 ? * friL", "", "", w("2026-03-27T10:15:00Z")},
	{"", "0 15 10 ? * 1L", "", "", w("2026-03-29T10:15:00Z", "2026-04-26T10:15:00Z", "2026-05-31T10:15:00Z")},
	{"", "0 15 10 ? * 6L 2026", "", "2026-11-30T00:00:00Z", w("2026-12-25T10:15:00Z", "")},
	// n#k: k-th such weekday.
	{"", "0 15 10 ? * 6#3", "", "", w("2026-03-20T10:15:00Z", "2026-04-17T10:15:00Z", "2026-05-15T10:15:00Z")},
	{"", "0 30 9 ? * 2#1", "", "", w("2026-03-02T09:30:00Z", "2026-04-06T09:30:00Z", "2026-05-04T09:30:00Z")},
	{"", "0 30 9 ? * 1#5", "", "", w("2026-03-29T09:30:00Z", "2026-05-31T09:30:00Z", "2026-08-30T09:30:00Z")},
	{"", "0 0 12 ? * mon#2", "", "", w("2026-03-09T12:00:00Z", "2026-04-13T12:00:00Z")},
	{"", "0 0 12 ? * SUN#1,SAT#1", "", "", w("2026-03-01T12:00:00Z", "2026-03-07T12:00:00Z", "2026-04-04T12:00:00Z", "2026-04-05T12:00:00Z")},
	{"", "0 0 12 ? jan,jul mon", "", "", w("2026-07-06T12:00:00Z", "2026-07-13T12:00:00Z")},
	// Years.
	{"", "0 0 0 1 1 ? 2030,2035", "", "", w("2030-01-01T00:00:00Z", "2035-01-01T00:00:00Z", "")},
	{"", "0 0 0 1 1 ? 2027/2", "", "", w("2027-01-01T00:00:00Z", "2029-01-01T00:00:00Z", "2031-01-01T00:00:00Z")},
	{"", "0 0 0 1 1 ? 2028-2029", "", "", w("2028-01-01T00:00:00Z", "2029-01-01T00:00:00Z", "")},
	{"", "0 0 0 1 1 ? 2020", "", "", w("")},
	{"", "0 0 0 31 12 ? 2099", "", "", w("2099-12-31T00:00:00Z", "")},
	{"", "0 0 0 29 2 ?", "", "", w("2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z")},
	// Quartz stops at 2099 even without a year field; standard cron does not.
	{"", "0 0 0 29 2 ?", "", "2096-03-01T00:00:00Z", w("")},
	{"", "0 0 0 1 1 ?", "", "2098-06-01T00:00:00Z", w("2099-01-01T00:00:00Z", "")},
	{"", "0 0 29 2 *", "", "2096-03-01T00:00:00Z", w("2104-02-29T00:00:00Z")},
	// A "*" day field next to a restricted one reads as "?".
	{"", "0 0 12 * * 1#2", "", "", w("2026-03-08T12:00:00Z", "2026-04-12T12:00:00Z")},
	{"", "0 0 12 L * *", "", "", w("2026-03-31T12:00:00Z")},

	// ---- standard 5-field cron (robfig semantics, dow 0/7 = Sunday) ----
	{"", "* * * * *", "", "", w("2026-03-01T10:01:00Z", "2026-03-01T10:02:00Z")},
	{"", "*/15 * * * *", "", "", w("2026-03-01T10:15:00Z", "2026-03-01T10:30:00Z")},
	{"", "5,10 * * * *", "", "", w("2026-03-01T10:05:00Z", "2026-03-01T10:10:00Z", "2026-03-01T11:05:00Z")},
	{"", "0 */6 * * *", "", "", w("2026-03-01T12:00:00Z", "2026-03-01T18:00:00Z", "2026-03-02T00:00:00Z")},
	{"", "0 9 * * 1-5", "", "", w("2026-03-02T09:00:00Z", "2026-03-03T09:00:00Z")},
	{"", "0 9 * * 0", "", "", w("2026-03-08T09:00:00Z")},
	{"", "0 9 * * 7", "", "", w("2026-03-08T09:00:00Z", "2026-03-15T09:00:00Z")},
	{"", "0 9 * * SUN", "", "", w("2026-03-08T09:00:00Z")},
	{"", "0 9 * * 5-7", "", "", w("2026-03-06T09:00:00Z", "2026-03-07T09:00:00Z", "2026-03-08T09:00:00Z", "2026-03-13T09:00:00Z")},
	{"", "0 9 * * 1", "", "", w("2026-03-02T09:00:00Z")},
	{"", "0 9 * * MON,WED", "", "", w("2026-03-02T09:00:00Z", "2026-03-04T09:00:00Z", "2026-03-09T09:00:00Z")},
	{"", "0 9 * * wed", "", "", w("2026-03-04T09:00:00Z")},
	{"", "0 9 1 * *", "", "", w("2026-04-01T09:00:00Z", "2026-05-01T09:00:00Z")},
	{"", "0 9 13 * *", "", "", w("2026-03-13T09:00:00Z", "2026-04-13T09:00:00Z")},
	{"", "0 9 13 * 5", "", "", w("2026-03-06T09:00:00Z", "2026-03-13T09:00:00Z", "2026-03-20T09:00:00Z", "2026-03-27T09:00:00Z", "2026-04-03T09:00:00Z", "2026-04-10T09:00:00Z", "2026-04-13T09:00:00Z")},
	{"", "0 9 */10 * *", "", "", w("2026-03-11T09:00:00Z", "2026-03-21T09:00:00Z", "2026-03-31T09:00:00Z", "2026-04-01T09:00:00Z")},
	{"", "0 0 * * */2", "", "", w("2026-03-03T00:00:00Z", "2026-03-05T00:00:00Z", "2026-03-07T00:00:00Z", "2026-03-08T00:00:00Z")},
	{"", "0 0 * * 1/2", "", "", w("2026-03-02T00:00:00Z", "2026-03-04T00:00:00Z", "2026-03-06T00:00:00Z", "2026-03-09T00:00:00Z")},
	{"", "0 0 1 JAN *", "", "", w("2027-01-01T00:00:00Z")},
	{"", "0 0 1 jul *", "", "", w("2026-07-01T00:00:00Z")},
	{"", "0 0 1 1,7 *", "", "", w("2026-07-01T00:00:00Z", "2027-01-01T00:00:00Z")},
	{"", "30 2 * * *", "", "", w("2026-03-02T02:30:00Z")},
	{"", "0 0 29 2 *", "", "", w("2028-02-29T00:00:00Z")},
	{"", "0 0 31 * *", "", "", w("2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z", "2026-07-31T00:00:00Z")},
	{"", "0 0 1-3 * *", "", "", w("2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z", "2026-04-01T00:00:00Z")},
	{"", "59 23 31 12 *", "", "", w("2026-12-31T23:59:00Z")},
	{"", "  0  12  *  *  *  ", "", "", w("2026-03-01T12:00:00Z")},
	// 6 fields, seconds first.
	{"", "*/1 * * * * *", "", "", w("2026-03-01T10:00:01Z", "2026-03-01T10:00:02Z")},
	{"", "30 * * * * *", "", "", w("2026-03-01T10:00:30Z", "2026-03-01T10:01:30Z")},
	{"", "0 30 9 * * 1-5", "", "", w("2026-03-02T09:30:00Z")},
	{"", "0 0 0 * * 0", "", "", w("2026-03-08T00:00:00Z")},
	{"", "0 0 0 * * 7", "", "", w("2026-03-08T00:00:00Z")},
	{"", "15 10 * * * SUN", "", "", w("2026-03-01T10:10:15Z", "2026-03-01T11:10:15Z")},
	{"", "0 0 12 * * *", "", "", w("2026-03-01T12:00:00Z")},
	{"", "0 0 12 * * 1", "", "", w("2026-03-02T12:00:00Z")},
	{"", "0,30 * * * * *", "", "", w("2026-03-01T10:00:30Z", "2026-03-01T10:01:00Z")},

	// ---- macros and @every ----
	{"", "@yearly", "", "", w("2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z")},
	{"", "@annually", "", "", w("2027-01-01T00:00:00Z")},
	{"", "@monthly", "", "", w("2026-04-01T00:00:00Z", "2026-05-01T00:00:00Z")},
	{"", "@weekly", "", "", w("2026-03-08T00:00:00Z", "2026-03-15T00:00:00Z")},
	{"", "@daily", "", "", w("2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z")},
	{"", "@midnight", "", "", w("2026-03-02T00:00:00Z")},
	{"", "@hourly", "", "", w("2026-03-01T11:00:00Z", "2026-03-01T12:00:00Z")},
	{"", "@HOURLY", "", "", w("2026-03-01T11:00:00Z")},
	{"", "@every 5s", "", "", w("2026-03-01T10:00:05Z", "2026-03-01T10:00:10Z")},
	{"", "@every 90s", "", "", w("2026-03-01T10:01:30Z", "2026-03-01T10:03:00Z")},
	{"", "@every 1h30m", "", "", w("2026-03-01T11:30:00Z", "2026-03-01T13:00:00Z")},
	{"", "@every 5s", "", "2026-03-01T10:00:00.7Z", w("2026-03-01T10:00:05Z")},

	// ---- fixed_rate, fixed_delay, once, none ----
	{TypeFixedRate, "5s", "", "", w("2026-03-01T10:00:05Z", "2026-03-01T10:00:10Z")},
	{TypeFixedRate, "30", "", "", w("2026-03-01T10:00:30Z", "2026-03-01T10:01:00Z")},
	{TypeFixedRate, "@every 2m", "", "", w("2026-03-01T10:02:00Z")},
	{TypeFixedRate, "1h30m", "", "", w("2026-03-01T11:30:00Z")},
	{TypeFixedRate, "1", "", "", w("2026-03-01T10:00:01Z", "2026-03-01T10:00:02Z")},
	{TypeFixedDelay, "10s", "", "", w("2026-03-01T10:00:10Z", "2026-03-01T10:00:20Z")},
	{TypeFixedDelay, "60", "", "", w("2026-03-01T10:01:00Z")},
	{TypeFixedDelay, "@every 1m", "", "", w("2026-03-01T10:01:00Z")},
	{TypeFixedDelay, "10s", "", "2026-03-01T10:00:00.25Z", w("2026-03-01T10:00:10.25Z")},
	{TypeOnce, "2026-03-01T12:00:00+01:00", "", "", w("2026-03-01T11:00:00Z", "")},
	{TypeOnce, "2026-03-01T12:00:00Z", "Europe/Berlin", "", w("2026-03-01T13:00:00+01:00", "")},
	{TypeOnce, "2026-03-01T09:00:00Z", "", "", w("")},
	{TypeOnce, "2026-03-01T10:00:00Z", "", "", w("")},
	{TypeOnce, "2026-03-05 08:00:00", "Europe/Berlin", "", w("2026-03-05T08:00:00+01:00", "")},
	{TypeOnce, "2026-07-05T08:00", "America/New_York", "", w("2026-07-05T08:00:00-04:00", "")},
	{TypeNone, "", "", "", w("")},
	{TypeNone, "0 0 12 * * ?", "", "", w("")},

	// ---- time zones without DST changes ----
	{"", "0 0 9 * * ?", "Asia/Shanghai", "", w("2026-03-02T09:00:00+08:00", "2026-03-03T09:00:00+08:00")},
	{"", "0 9 * * *", "Asia/Shanghai", "", w("2026-03-02T09:00:00+08:00")},
	{"", "0 30 * * * ?", "Asia/Kolkata", "", w("2026-03-01T16:30:00+05:30", "2026-03-01T17:30:00+05:30")},
	{"", "0 0 0 L * ?", "Asia/Kathmandu", "", w("2026-03-31T00:00:00+05:45")},
	{"", "@daily", "Asia/Tokyo", "", w("2026-03-02T00:00:00+09:00")},

	// ---- Europe/Berlin: spring forward 2026-03-29 02:00 -> 03:00 ----
	{"", "0 30 2 * * ?", "Europe/Berlin", "2026-03-28T00:00:00+01:00", w("2026-03-28T02:30:00+01:00", "2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00")},
	{"", "30 2 * * *", "Europe/Berlin", "2026-03-28T00:00:00+01:00", w("2026-03-28T02:30:00+01:00", "2026-03-30T02:30:00+02:00")},
	{"", "0 0 2 * * ?", "Europe/Berlin", "2026-03-28T12:00:00+01:00", w("2026-03-30T02:00:00+02:00")},
	{"", "0 59 2 * * ?", "Europe/Berlin", "2026-03-28T12:00:00+01:00", w("2026-03-30T02:59:00+02:00")},
	{"", "0 0 3 * * ?", "Europe/Berlin", "2026-03-28T12:00:00+01:00", w("2026-03-29T03:00:00+02:00", "2026-03-30T03:00:00+02:00")},
	{"", "0 59 1 * * ?", "Europe/Berlin", "2026-03-28T12:00:00+01:00", w("2026-03-29T01:59:00+01:00", "2026-03-30T01:59:00+02:00")},
	{"", "0 0 * * * ?", "Europe/Berlin", "2026-03-29T00:30:00+01:00", w("2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T04:00:00+02:00")},
	{"", "@hourly", "Europe/Berlin", "2026-03-29T00:30:00+01:00", w("2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00")},
	{"", "0 */30 * * * *", "Europe/Berlin", "2026-03-29T01:00:00+01:00", w("2026-03-29T01:30:00+01:00", "2026-03-29T03:00:00+02:00", "2026-03-29T03:30:00+02:00")},
	{"", "59 59 1 * * ?", "Europe/Berlin", "2026-03-29T01:00:00+01:00", w("2026-03-29T01:59:59+01:00", "2026-03-30T01:59:59+02:00")},
	{"", "* * 2 * * ?", "Europe/Berlin", "2026-03-29T01:59:58+01:00", w("2026-03-30T02:00:00+02:00", "2026-03-30T02:00:01+02:00")},
	{"", "0 30 2 ? 3 1L", "Europe/Berlin", "2026-01-01T00:00:00+01:00", w("")},
	{"", "0 30 2 ? 3 1L", "UTC", "2026-01-01T00:00:00Z", w("2026-03-29T02:30:00Z", "2027-03-28T02:30:00Z")},
	{"", "@daily", "Europe/Berlin", "2026-03-28T12:00:00+01:00", w("2026-03-29T00:00:00+01:00", "2026-03-30T00:00:00+02:00")},
	{TypeFixedRate, "1h", "Europe/Berlin", "2026-03-29T01:30:00+01:00", w("2026-03-29T03:30:00+02:00", "2026-03-29T04:30:00+02:00")},
	{TypeOnce, "2026-03-29 02:30:00", "Europe/Berlin", "2026-03-28T00:00:00+01:00", w("2026-03-29T03:30:00+02:00", "")},
	// ---- Europe/Berlin: fall back 2026-10-25 03:00 -> 02:00 ----
	{"", "0 30 2 * * ?", "Europe/Berlin", "2026-10-24T12:00:00+02:00", w("2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00")},
	{"", "30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00+02:00", w("2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00")},
	{"", "0 30 2 * * ?", "Europe/Berlin", "2026-10-25T02:40:00+02:00", w("2026-10-26T02:30:00+01:00")},
	{"", "0 30 2 * * ?", "Europe/Berlin", "2026-10-25T02:10:00+01:00", w("2026-10-26T02:30:00+01:00")},
	{"", "0 0 * * * ?", "Europe/Berlin", "2026-10-25T01:30:00+02:00", w("2026-10-25T02:00:00+02:00", "2026-10-25T03:00:00+01:00", "2026-10-25T04:00:00+01:00")},
	{"", "0 0/30 * * * ?", "Europe/Berlin", "2026-10-25T01:45:00+02:00", w("2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-25T03:00:00+01:00")},
	{"", "0 0/30 * * * ?", "Europe/Berlin", "2026-10-25T02:10:00+01:00", w("2026-10-25T03:00:00+01:00")},
	{"", "0 0 3 * * ?", "Europe/Berlin", "2026-10-24T12:00:00+02:00", w("2026-10-25T03:00:00+01:00")},
	{"", "0 0 1 * * ?", "Europe/Berlin", "2026-10-24T12:00:00+02:00", w("2026-10-25T01:00:00+02:00", "2026-10-26T01:00:00+01:00")},
	{"", "@daily", "Europe/Berlin", "2026-10-24T12:00:00+02:00", w("2026-10-25T00:00:00+02:00", "2026-10-26T00:00:00+01:00")},
	{TypeFixedRate, "1h", "Europe/Berlin", "2026-10-25T01:30:00+02:00", w("2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00", "2026-10-25T03:30:00+01:00")},

	// ---- America/New_York: spring forward 2026-03-08 02:00 -> 03:00 ----
	{"", "30 2 * * *", "America/New_York", "2026-03-07T12:00:00-05:00", w("2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00")},
	{"", "0 30 2 * * ?", "America/New_York", "2026-03-07T12:00:00-05:00", w("2026-03-09T02:30:00-04:00")},
	{"", "0 0 2 * * ?", "America/New_York", "2026-03-07T12:00:00-05:00", w("2026-03-09T02:00:00-04:00")},
	{"", "0 0 * * * ?", "America/New_York", "2026-03-08T00:30:00-05:00", w("2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00")},
	{"", "0 59 1 * * ?", "America/New_York", "2026-03-07T12:00:00-05:00", w("2026-03-08T01:59:00-05:00", "2026-03-09T01:59:00-04:00")},
	{"", "0 0 3 * * ?", "America/New_York", "2026-03-07T12:00:00-05:00", w("2026-03-08T03:00:00-04:00")},
	{"", "*/20 * * * *", "America/New_York", "2026-03-08T01:30:00-05:00", w("2026-03-08T01:40:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T03:20:00-04:00")},
	{"", "@daily", "America/New_York", "2026-03-07T12:00:00-05:00", w("2026-03-08T00:00:00-05:00", "2026-03-09T00:00:00-04:00")},
	{"", "0 0 9 ? * 2#1", "America/New_York", "", w("2026-03-02T09:00:00-05:00", "2026-04-06T09:00:00-04:00")},
	{"", "0 0 0 L * ?", "America/New_York", "", w("2026-03-31T00:00:00-04:00")},
	{"", "0 30 2 ? 3 1#2", "America/New_York", "2026-01-01T00:00:00-05:00", w("")},
	// ---- America/New_York: fall back 2026-11-01 02:00 -> 01:00 ----
	{"", "0 30 1 * * ?", "America/New_York", "2026-10-31T12:00:00-04:00", w("2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00")},
	{"", "30 1 * * *", "America/New_York", "2026-10-31T12:00:00-04:00", w("2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00")},
	{"", "*/20 * * * *", "America/New_York", "2026-11-01T00:50:00-04:00", w("2026-11-01T01:00:00-04:00", "2026-11-01T01:20:00-04:00", "2026-11-01T01:40:00-04:00", "2026-11-01T02:00:00-05:00")},
	{"", "0 */15 * * * ?", "America/New_York", "2026-11-01T01:20:00-05:00", w("2026-11-01T02:00:00-05:00", "2026-11-01T02:15:00-05:00")},
	{"", "0 30 1 * * ?", "America/New_York", "2026-11-01T01:10:00-05:00", w("2026-11-02T01:30:00-05:00")},
	{"", "0 0 2 * * ?", "America/New_York", "2026-10-31T12:00:00-04:00", w("2026-11-01T02:00:00-05:00")},
	{"", "@hourly", "America/New_York", "2026-11-01T00:30:00-04:00", w("2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00")},
	{"", "0 0 0 ? 11 1#1", "America/New_York", "", w("2026-11-01T00:00:00-04:00", "2027-11-07T00:00:00-04:00")},
	{TypeFixedDelay, "30m", "America/New_York", "2026-11-01T01:45:00-04:00", w("2026-11-01T01:15:00-05:00", "2026-11-01T01:45:00-05:00")},
}

func TestNextTable(t *testing.T) {
	t.Parallel()
	require.GreaterOrEqual(t, len(nextCases), 150)
	for _, c := range nextCases {
		name := fmt.Sprintf("%s/%s/%s/%s", c.typ, c.expr, c.tz, c.from)
		tz := c.tz
		if tz == "" {
			tz = "UTC"
		}
		loc, err := time.LoadLocation(tz)
		require.NoError(t, err)
		from := c.from
		if from == "" {
			from = base
		}
		at, err := time.Parse(time.RFC3339Nano, from)
		require.NoError(t, err, name)
		s, err := Parse(c.typ, c.expr, tz, nil)
		require.NoError(t, err, name)
		var got []string
		for range c.want {
			n := s.Next(at)
			if n.IsZero() {
				got = append(got, "")
				break
			}
			got = append(got, n.In(loc).Format(time.RFC3339Nano))
			at = n
		}
		require.Equal(t, c.want, got, name)
	}
}

func TestTimezoneArgument(t *testing.T) {
	t.Parallel()
	// tz wins over loc; "" falls back to loc; nil loc is time.Local.
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	s, err := Parse(TypeCron, "0 9 * * *", "Asia/Shanghai", time.UTC)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC), s.Next(from).UTC())
	tokyo, err := time.LoadLocation("Asia/Tokyo")
	require.NoError(t, err)
	s, err = Parse(TypeCron, "0 9 * * *", "", tokyo)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC), s.Next(from).UTC()) // 09:00 JST is from itself
	_, err = Parse("", "0 9 * * *", "", nil)
	require.NoError(t, err)
}

func TestQuartzVersusStandardNumbering(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 3, 1, 13, 0, 0, 0, time.UTC) // Sunday afternoon
	// Parse: 6 plain fields are standard cron, so 1 = Monday.
	s, err := Parse(TypeCron, "0 0 12 * * 1", "UTC", nil)
	require.NoError(t, err)
	require.Equal(t, time.March, s.Next(from).Month())
	require.Equal(t, time.Monday, s.Next(from).Weekday())
	// ParseQuartz: always Quartz, so 1 = Sunday.
	q, err := ParseQuartz("0 0 12 * * 1", time.UTC)
	require.NoError(t, err)
	require.Equal(t, time.Sunday, q.Next(from).Weekday())
	require.Equal(t, 8, q.Next(from).Day())
	// ParseQuartz rejects what Quartz cannot read.
	for _, expr := range []string{"* * * * *", "@daily", "0 0 12 * * 8", "0 0 12 * * 0"} {
		_, err := ParseQuartz(expr, time.UTC)
		require.Error(t, err, expr)
	}
	// nil loc is time.Local.
	_, err = ParseQuartz("0 0 12 * * ?", nil)
	require.NoError(t, err)
}

func TestIntervals(t *testing.T) {
	t.Parallel()
	s, err := Parse(TypeFixedDelay, "90s", "", time.UTC)
	require.NoError(t, err)
	d, ok := FixedDelay(s)
	require.True(t, ok)
	require.Equal(t, 90*time.Second, d)
	_, ok = FixedRate(s)
	require.False(t, ok)

	for _, c := range []struct{ typ, expr string }{{TypeFixedRate, "90"}, {TypeCron, "@every 1m30s"}, {TypeFixedRate, "@every 90s"}} {
		s, err := Parse(c.typ, c.expr, "", time.UTC)
		require.NoError(t, err, c.expr)
		d, ok := FixedRate(s)
		require.True(t, ok, c.expr)
		require.Equal(t, 90*time.Second, d, c.expr)
		_, ok = FixedDelay(s)
		require.False(t, ok, c.expr)
	}
	s, err = Parse(TypeCron, "* * * * *", "", time.UTC)
	require.NoError(t, err)
	_, ok = FixedDelay(s)
	require.False(t, ok)
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	cases := []struct{ typ, expr, tz, want string }{
		{"", "", "", "schedule is empty"},
		{"", "   ", "", "schedule is empty"},
		{"", "bogus", "", "has 1 fields"},
		{"", "* * * *", "", "has 4 fields"},
		{"", "* * * * * * * *", "", "has 8 fields"},
		{"", "TZ=UTC * * * * *", "", "timezone field"},
		{"", "CRON_TZ=UTC * * * * *", "", "timezone field"},
		{"", "@every 10ms", "", "shorter than 1s"},
		{"", "@every x", "", `"x" is not a duration`},
		{"", "@every", "", "needs an interval"},
		{"", "@every 1500ms", "", "not a whole number of seconds"},
		{"", "@fortnightly", "", `unknown macro "@fortnightly"`},
		{"", "61 * * * *", "", `minute: "61" is out of range 0-59`},
		{"", "* 24 * * *", "", `hour: "24" is out of range 0-23`},
		{"", "* * 0 * *", "", `day-of-month: "0" is out of range 1-31`},
		{"", "* * 32 * *", "", `day-of-month: "32" is out of range 1-31`},
		{"", "* * * 13 *", "", `month: "13" is out of range 1-12`},
		{"", "* * * * 8", "", `day-of-week: "8" is out of range 0-7`},
		{"", "60 * * * * *", "", `second: "60" is out of range 0-59`},
		{"", "* * * FOO *", "", `month: "FOO" is not a number or a name`},
		{"", "x * * * *", "", `minute: "x" is not a number`},
		{"", "*/0 * * * *", "", `minute: step "0" in "*/0" must be a whole number of at least 1`},
		{"", "*/x * * * *", "", `minute: step "x"`},
		{"", "10-5 * * * *", "", `minute: range "10-5": 10 is after 5`},
		{"", "1,,2 * * * *", "", `minute: empty list item in "1,,2"`},
		{"", "-5 * * * *", "", `minute: "-5" is missing a number`},
		{"", "0 0 30 2 *", "", "never fires"},
		{"", "0 0 31 4,6,9,11 *", "", "never fires"},
		{"", "0 0 0 30 2 ?", "", "never fires"},
		{"", "0 0 0 ? 2 2#5 2026-2027", "", "never fires"},
		{"", "0 0 0 31W 2 ?", "", "never fires"},
		{"", "0 0 12 ? * 8", "", `day-of-week: "8" is out of range 1-7`},
		{"", "0 0 12 ? * 0", "", `day-of-week: "0" is out of range 1-7`},
		{"", "0 0 12 ? * 6#6", "", `day-of-week: "6#6": the number after # must be from 1 to 5`},
		{"", "0 0 12 ? * 9#1", "", `day-of-week: "9" is out of range 1-7`},
		{"", "0 0 12 ? * 8L", "", `day-of-week: "8" is out of range 1-7`},
		{"", "0 0 12 ? * W", "", `day-of-week: "W"`},
		{"", "0 0 12 ? * XYZ", "", `day-of-week: "XYZ" is not a number or a name`},
		{"", "0 0 12 32 * ?", "", `day-of-month: "32" is out of range 1-31`},
		{"", "0 0 12 L-31 * ?", "", `day-of-month: "L-31": the offset after L- must be a number from 0 to 30`},
		{"", "0 0 12 L-31W * ?", "", `day-of-month: "L-31W": the offset after L- must be a number from 0 to 30`},
		{"", "0 0 12 L-W * ?", "", `day-of-month: "L-W": the offset after L- must be a number from 0 to 30`},
		{"", "0 0 12 L-3WW * ?", "", `day-of-month: "L-3WW"`},
		// A step larger than its field's range, as Quartz refuses it.
		{"", "0/60 * * * * ?", "", `second: step 60 in "0/60" is larger than the field allows (at most 59)`},
		{"", "0 0/60 * * * ?", "", `minute: step 60 in "0/60" is larger than the field allows (at most 59)`},
		{"", "0 0 0/24 * * ?", "", `hour: step 24 in "0/24" is larger than the field allows (at most 23)`},
		{"", "0 0 0 1/32 * ?", "", `day-of-month: step 32 in "1/32" is larger than the field allows (at most 31)`},
		{"", "0 0 0 1 1/13 ?", "", `month: step 13 in "1/13" is larger than the field allows (at most 12)`},
		{"", "0 0 0 ? * 1/8", "", `day-of-week: step 8 in "1/8" is larger than the field allows (at most 7)`},

		{"", "0 0 12 32W * ?", "", `day-of-month: "32W"`},
		{"", "0 0 12 1-5W * ?", "", `day-of-month: "1-5W"`},
		{"", "0 0 12 5L * ?", "", `day-of-month: "5L": L must stand alone`},
		{"", "0 0 12 ? * ? *", "", `only one of them may be "?"`},
		{"", "0 0 12 1 * 2 *", "", `Quartz cannot restrict both`},
		{"", "0 0 12 * 13 ?", "", `month: "13" is out of range 1-12`},
		{"", "0 0 12 * * ? 1969", "", `year: "1969" is out of range 1970-2099`},
		{"", "0 0 12 * * ? 2100", "", `year: "2100" is out of range 1970-2099`},
		{"", "0 0 12 * * ? 2030-2020", "", `year: range "2030-2020": 2030 is after 2020`},
		{"", "0 0 24 * * ?", "", `hour: "24" is out of range 0-23`},
		{"", "0 60 * * * ?", "", `minute: "60" is out of range 0-59`},
		{"", "0 0 0 ? * 1#", "", `the number after # must be from 1 to 5`},
		{"", "? * * * *", "", "expected 6 or 7 fields for Quartz cron (second minute hour day-of-month month day-of-week [year]), found 5"},
		{"", "0 0 12 * * * 1 2", "", "has 8 fields"},
		{"cronx", "* * * * *", "", `unknown schedule type "cronx" (supported: cron, fixed_rate, fixed_delay, once, none)`},
		{"", "* * * * *", "Mars/Base", `unknown time zone "Mars/Base"`},
		{"", "* * * * *", "Local", `unknown time zone "Local"`},
		{TypeFixedRate, "", "", "fixed_rate needs an interval"},
		{TypeFixedRate, "0", "", `fixed_rate: interval "0" must be at least 1 second`},
		{TypeFixedRate, "-3", "", `fixed_rate: interval "-3" must be at least 1 second`},
		{TypeFixedRate, "500ms", "", "fixed_rate: interval 500ms is shorter than 1s"},
		{TypeFixedRate, "1.5s", "", "fixed_rate: interval 1.5s is not a whole number of seconds"},
		{TypeFixedRate, "soon", "", `fixed_rate: "soon" is not a duration`},
		{TypeFixedRate, "99999999999999999", "", "too long"},
		{TypeFixedDelay, "", "", "fixed_delay needs an interval"},
		{TypeFixedDelay, "0s", "", "fixed_delay: interval 0s is shorter than 1s"},
		{TypeFixedDelay, "* * * * *", "", `fixed_delay: "* * * * *" is not a duration`},
		{TypeOnce, "", "", "once needs a time"},
		{TypeOnce, "tomorrow", "", `once: "tomorrow" is not an RFC 3339 time`},
		{TypeOnce, "2026-13-01T00:00:00Z", "", `once: "2026-13-01T00:00:00Z"`},
	}
	for _, c := range cases {
		_, err := Parse(c.typ, c.expr, c.tz, time.UTC)
		require.ErrorContains(t, err, c.want, "%s %q", c.typ, c.expr)
	}
}

func TestErrorKinds(t *testing.T) {
	t.Parallel()
	_, err := Parse("cronx", "* * * * *", "", nil)
	require.ErrorIs(t, err, ErrUnknownType)
	_, err = Parse("", "* * * * *", "Mars/Base", nil)
	require.ErrorIs(t, err, ErrUnknownZone)
	_, err = Parse("", "0 0 0 30 2 ?", "", nil)
	require.ErrorIs(t, err, ErrNeverFires)
	_, err = Parse("", "0 0 99 * *", "", nil)
	require.Error(t, err)
	require.False(t, errors.Is(err, ErrNeverFires))
	require.True(t, ValidType(""))
	require.True(t, ValidType(TypeNone))
	require.False(t, ValidType("quartz"))
}

// TestStandardMatchesRobfig checks the standard dialect against robfig/cron
// itself (in UTC, where no DST rule differs) on random expressions.
func TestStandardMatchesRobfig(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	robfig := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
	item := func(min, max int) string {
		switch rng.IntN(6) {
		case 0:
			return "*"
		case 1:
			return fmt.Sprintf("*/%d", 1+rng.IntN(max-min+1))
		case 2:
			a := min + rng.IntN(max-min+1)
			b := a + rng.IntN(max-a+1)
			return fmt.Sprintf("%d-%d", a, b)
		case 3:
			a := min + rng.IntN(max-min+1)
			b := a + rng.IntN(max-a+1)
			return fmt.Sprintf("%d-%d/%d", a, b, 1+rng.IntN(5))
		case 4:
			return fmt.Sprintf("%d/%d", min+rng.IntN(max-min+1), 1+rng.IntN(7))
		default:
			return fmt.Sprintf("%d,%d", min+rng.IntN(max-min+1), min+rng.IntN(max-min+1))
		}
	}
	checked := 0
	for range 2000 {
		f := []string{item(0, 59), item(0, 59), item(0, 23), item(1, 31), item(1, 12), item(0, 6)}
		if rng.IntN(2) == 0 {
			f = f[1:]
		}
		expr := strings.Join(f, " ")
		want, werr := robfig.Parse(expr)
		got, gerr := Parse(TypeCron, expr, "UTC", nil)
		if werr != nil {
			require.Error(t, gerr, expr)
			continue
		}
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(1e6)) * time.Second)
		if want.Next(at).IsZero() { // robfig gives up after 5 years
			continue
		}
		require.NoError(t, gerr, expr)
		wt, gt := at, at
		for range 5 {
			wt, gt = want.Next(wt), got.Next(gt)
			require.Equal(t, wt.UTC(), gt.UTC(), "%s from %s", expr, at)
		}
		checked++
	}
	require.Greater(t, checked, 1000)
}

// fuzzSeeds is FuzzParse's seed corpus, also run by TestFuzzSeeds.
var fuzzSeeds = []struct{ typ, expr, tz string }{
	{"", "0/10 * * * * ? *", "UTC"},
	{"", "0 15 10 ? * 6L 2026-2030", "Europe/Berlin"},
	{"", "0 0 0 LW * ?", "America/New_York"},
	{"", "0 0 0 15W,L-3 * ?", "Asia/Kolkata"},
	{"", "0 0 12 ? * 6#3,FRIL", "Australia/Lord_Howe"},
	{"", "* * * * * ?", "Europe/Berlin"},
	{"", "0 30 2 ? 3 1L", "Europe/Berlin"},
	{"", "*/20 * * * *", "America/New_York"},
	{"", "0 0 22-2/3 * NOV-FEB ?", "Pacific/Chatham"},
	{"", "5 4 * * sun", ""},
	{"", "0 0 29 2 *", "UTC"},
	{"", "@every 1h", ""},
	{"", "@weekly", "Asia/Tokyo"},
	{TypeFixedRate, "17", ""},
	{TypeFixedDelay, "@every 2m", ""},
	{TypeOnce, "2026-03-29T02:30:00+01:00", "Europe/Berlin"},
	{TypeNone, "", ""},
	{"", "0 0 0 ? 2 2#5", "UTC"},
	{"", "1-5 * * L,LW,1W * ?", ""},
	{"", "0 0 0 31 12 ? 2099", ""},
}

// checkParse is the fuzz property: Parse never panics, and when it accepts,
// Next is strictly increasing and finishes.
func checkParse(t *testing.T, typ, expr, tz string) {
	s, err := Parse(typ, expr, tz, time.UTC)
	if err != nil {
		require.NotEmpty(t, err.Error())
		return
	}
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	for range 20 {
		n := s.Next(at)
		if n.IsZero() {
			return
		}
		require.True(t, n.After(at), "%q %q: Next(%s) = %s", typ, expr, at, n)
		at = n
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.typ, s.expr, s.tz)
	}
	f.Fuzz(func(t *testing.T, typ, expr, tz string) {
		if len(expr) > 200 || len(tz) > 64 {
			return
		}
		checkParse(t, typ, expr, tz)
	})
}

func TestFuzzSeeds(t *testing.T) {
	t.Parallel()
	for _, s := range fuzzSeeds {
		_, err := Parse(s.typ, s.expr, s.tz, time.UTC)
		require.NoError(t, err, s.expr)
		checkParse(t, s.typ, s.expr, s.tz)
	}
}

// TestLastOffsetWeekday checks "L-nW" (the weekday nearest the n-th-to-last
// day) against Quartz 2.3.2's rule. No Quartz jar could be fetched offline
// (mvn dependency:get failed: no registry), so the expected dates were
// computed by a Java program transcribing the lastdayOfMonth+nearestWeekday
// branch of CronExpression.getTimeAfter over java.util.GregorianCalendar:
// day = last day - n; a Saturday moves to Friday (to Monday the 3rd when it
// is the 1st), a Sunday to Monday (to Friday when it is the last day).
// L-30W leaves out the months shorter than 31 days, where dim-30 is not a
// day of the month: Quartz then reads day 0 or less through a lenient
// Calendar (its answer is an artefact), and Cronix does not fire.
func TestLastOffsetWeekday(t *testing.T) {
	t.Parallel()
	cases := []struct {
		dom  string
		want []string // dates in 2026-2027, midnight UTC
	}{
		{"L-0W", []string{"2026-01-30", "2026-02-27", "2026-03-31", "2026-04-30", "2026-05-29", "2026-06-30", "2026-07-31", "2026-08-31", "2026-09-30", "2026-10-30", "2026-11-30", "2026-12-31", "2027-01-29", "2027-02-26", "2027-03-31", "2027-04-30", "2027-05-31", "2027-06-30", "2027-07-30", "2027-08-31", "2027-09-30", "2027-10-29", "2027-11-30", "2027-12-31"}},
		{"L-1W", []string{"2026-01-30", "2026-02-27", "2026-03-30", "2026-04-29", "2026-05-29", "2026-06-29", "2026-07-30", "2026-08-31", "2026-09-29", "2026-10-30", "2026-11-30", "2026-12-30", "2027-01-29", "2027-02-26", "2027-03-30", "2027-04-29", "2027-05-31", "2027-06-29", "2027-07-30", "2027-08-30", "2027-09-29", "2027-10-29", "2027-11-29", "2027-12-30"}},
		{"L-2W", []string{"2026-01-29", "2026-02-26", "2026-03-30", "2026-04-28", "2026-05-29", "2026-06-29", "2026-07-29", "2026-08-28", "2026-09-28", "2026-10-29", "2026-11-27", "2026-12-29", "2027-01-29", "2027-02-26", "2027-03-29", "2027-04-28", "2027-05-28", "2027-06-28", "2027-07-29", "2027-08-30", "2027-09-28", "2027-10-29", "2027-11-29", "2027-12-29"}},
		{"L-3W", []string{"2026-01-28", "2026-02-25", "2026-03-27", "2026-04-27", "2026-05-28", "2026-06-26", "2026-07-28", "2026-08-28", "2026-09-28", "2026-10-28", "2026-11-27", "2026-12-28", "2027-01-28", "2027-02-25", "2027-03-29", "2027-04-27", "2027-05-28", "2027-06-28", "2027-07-28", "2027-08-27", "2027-09-27", "2027-10-28", "2027-11-26", "2027-12-28"}},
		{"L-5W", []string{"2026-01-26", "2026-02-23", "2026-03-26", "2026-04-24", "2026-05-26", "2026-06-25", "2026-07-27", "2026-08-26", "2026-09-25", "2026-10-26", "2026-11-25", "2026-12-25", "2027-01-26", "2027-02-23", "2027-03-26", "2027-04-26", "2027-05-26", "2027-06-25", "2027-07-26", "2027-08-26", "2027-09-24", "2027-10-26", "2027-11-25", "2027-12-27"}},
		{"L-10W", []string{"2026-01-21", "2026-02-18", "2026-03-20", "2026-04-20", "2026-05-21", "2026-06-19", "2026-07-21", "2026-08-21", "2026-09-21", "2026-10-21", "2026-11-20", "2026-12-21", "2027-01-21", "2027-02-18", "2027-03-22", "2027-04-20", "2027-05-21", "2027-06-21", "2027-07-21", "2027-08-20", "2027-09-20", "2027-10-21", "2027-11-19", "2027-12-21"}},
		{"L-27W", []string{"2026-01-05", "2026-02-02", "2026-03-04", "2026-04-03", "2026-05-04", "2026-06-03", "2026-07-03", "2026-08-04", "2026-09-03", "2026-10-05", "2026-11-03", "2026-12-04", "2027-01-04", "2027-02-01", "2027-03-04", "2027-04-02", "2027-05-04", "2027-06-03", "2027-07-05", "2027-08-04", "2027-09-03", "2027-10-04", "2027-11-03", "2027-12-03"}},
		{"L-30W", []string{"2026-01-01", "2026-03-02", "2026-05-01", "2026-07-01", "2026-08-03", "2026-10-01", "2026-12-01", "2027-01-01", "2027-03-01", "2027-05-03", "2027-07-01", "2027-08-02", "2027-10-01", "2027-12-01"}},
	}
	for _, c := range cases {
		s, err := Parse("", "0 0 0 "+c.dom+" * ?", "UTC", nil)
		require.NoError(t, err, c.dom)
		at := time.Date(2025, 12, 31, 12, 0, 0, 0, time.UTC)
		for _, want := range c.want {
			at = s.Next(at)
			require.Equal(t, want, at.Format("2006-01-02"), c.dom)
			require.Equal(t, "00:00:00", at.Format("15:04:05"), c.dom)
		}
	}
	// Lower case reads the same, and L-nW combines with other days.
	s, err := Parse("", "0 0 0 l-2w * ?", "UTC", nil)
	require.NoError(t, err)
	require.Equal(t, "2026-01-29", s.Next(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)).Format("2006-01-02"))
	s, err = Parse("", "0 0 0 1,L-3W * ?", "UTC", nil)
	require.NoError(t, err)
	require.Equal(t, "2026-01-28", s.Next(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)).Format("2006-01-02"))
	require.Equal(t, "2026-02-01", s.Next(time.Date(2026, 1, 28, 0, 0, 0, 0, time.UTC)).Format("2006-01-02"))
}

// TestStepAtTheLimit: the largest step each field allows still parses.
func TestStepAtTheLimit(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"0/59 * * * * ?", "0 0/59 * * * ?", "0 0 0/23 * * ?", "0 0 0 1/31 * ?",
		"0 0 0 1 1/12 ?", "0 0 0 ? * 1/7", "0 0 0 1 1 ? 2026/73",
		// Standard cron keeps robfig/cron's leniency: "*/60" is minute 0.
		"*/59 * * * *", "*/60 * * * *", "0 */24 * * *"} {
		_, err := Parse("", expr, "UTC", nil)
		require.NoError(t, err, expr)
	}
}

// TestCheckFuture: a schedule that parses but has no fire after now is
// refused with ErrNeverFires, naming why.
func TestCheckFuture(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct{ typ, expr, tz, want string }{
		// Every match is a wall-clock time skipped by spring-forward:
		// 02:30 on the last Sunday of March in Europe/Berlin.
		{"", "0 30 2 ? 3 1L", "Europe/Berlin", "daylight-saving gap of Europe/Berlin"},
		{"", "0 30 2 ? 3 1L *", "Europe/Berlin", "daylight-saving gap of Europe/Berlin"},
		{"", "* * 2 ? 3 1L", "Europe/Berlin", "daylight-saving gap of Europe/Berlin"},
		{"", "0 30 2 ? 3 1#2", "America/New_York", "daylight-saving gap of America/New_York"},
		{"", "0 30 2 29 3 ? 2026", "Europe/Berlin", "daylight-saving gap"},
		{"", "0 0 0 1 1 ? 2020", "UTC", "every date it matches is in the past"},
		{"", "0 0 0 1 1 ? 2020-2025", "UTC", "every date it matches is in the past"},
		{TypeOnce, "2026-03-01T09:00:00Z", "UTC", "once time 2026-03-01T09:00:00Z is in the past"},
		{TypeOnce, "2026-03-01T10:00:00Z", "UTC", "in the past"},
		{TypeOnce, "2026-03-01 10:30:00", "Europe/Berlin", "in the past"},
	}
	for _, c := range cases {
		s, err := Parse(c.typ, c.expr, c.tz, nil)
		require.NoError(t, err, c.expr)
		err = CheckFuture(s, now)
		require.ErrorIs(t, err, ErrNeverFires, c.expr)
		require.ErrorContains(t, err, c.want, c.expr)
	}
	for _, c := range []struct{ typ, expr, tz string }{
		{"", "0 30 2 ? 3 1L", "UTC"},
		{"", "0 30 2 * * ?", "Europe/Berlin"},
		{"", "0 30 3 ? 3 1L", "Europe/Berlin"},
		{"", "0 0 0 1 1 ? 2020,2030", "UTC"},
		{"", "@every 5s", "UTC"},
		{TypeFixedDelay, "10s", "UTC"},
		{TypeNone, "", "UTC"},
		{TypeOnce, "2026-03-01T10:00:01Z", "UTC"},
	} {
		s, err := Parse(c.typ, c.expr, c.tz, nil)
		require.NoError(t, err, c.expr)
		require.NoError(t, CheckFuture(s, now), c.expr)
	}
}
