package api_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cronix/cronix/server/api"
)

// previewPath builds GET /api/v1/schedules/preview with query kv pairs.
func previewPath(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return "/api/v1/schedules/preview?" + q.Encode()
}

func TestSchedulePreview(t *testing.T) {
	t.Parallel()
	b := setup(t) // clock: 2026-03-01T12:00:00Z, server zone UTC

	t.Run("requires a user", func(t *testing.T) {
		e := b.errorOf(http.MethodGet, previewPath("schedule", "* * * * *"), "", nil, http.StatusUnauthorized)
		require.Contains(t, e.Error, "bearer token")
		b.errorOf(http.MethodGet, previewPath("schedule", "* * * * *"), "wrong-token", nil, http.StatusUnauthorized)
		b.errorOf(http.MethodPost, previewPath("schedule", "* * * * *"), b.token, nil, http.StatusMethodNotAllowed)
	})

	cases := []struct {
		name  string
		query []string
		want  api.SchedulePreview
	}{
		{"default type and count, server zone", []string{"schedule", "0 0 12 * * ?"}, api.SchedulePreview{
			ScheduleType: "cron", Schedule: "0 0 12 * * ?", Timezone: "UTC",
			Next: []string{"2026-03-02T12:00:00Z", "2026-03-03T12:00:00Z", "2026-03-04T12:00:00Z", "2026-03-05T12:00:00Z", "2026-03-06T12:00:00Z"},
		}},
		{"quartz last friday in a zone", []string{"schedule_type", "cron", "schedule", " 0 15 10 ? * FRIL ", "timezone", "Europe/Berlin", "n", "3"}, api.SchedulePreview{
			ScheduleType: "cron", Schedule: "0 15 10 ? * FRIL", Timezone: "Europe/Berlin",
			Next: []string{"2026-03-27T10:15:00+01:00", "2026-04-24T10:15:00+02:00", "2026-05-29T10:15:00+02:00"},
		}},
		{"standard cron in New York", []string{"schedule", "30 2 * * 0", "timezone", "America/New_York", "n", "2"}, api.SchedulePreview{
			ScheduleType: "cron", Schedule: "30 2 * * 0", Timezone: "America/New_York",
			// 2026-03-08 02:30 does not exist (spring forward): skipped.
			Next: []string{"2026-03-15T02:30:00-04:00", "2026-03-22T02:30:00-04:00"},
		}},
		{"every", []string{"schedule", "@every 90s", "n", "2"}, api.SchedulePreview{
			ScheduleType: "cron", Schedule: "@every 90s", Timezone: "UTC",
			Next: []string{"2026-03-01T12:01:30Z", "2026-03-01T12:03:00Z"},
		}},
		{"fixed rate", []string{"schedule_type", "fixed_rate", "schedule", "30", "n", "2"}, api.SchedulePreview{
			ScheduleType: "fixed_rate", Schedule: "30", Timezone: "UTC",
			Next: []string{"2026-03-01T12:00:30Z", "2026-03-01T12:01:00Z"},
		}},
		{"fixed delay", []string{"schedule_type", "fixed_delay", "schedule", "1m", "n", "2"}, api.SchedulePreview{
			ScheduleType: "fixed_delay", Schedule: "1m", Timezone: "UTC",
			Next: []string{"2026-03-01T12:01:00Z", "2026-03-01T12:02:00Z"},
		}},
		{"once", []string{"schedule_type", "once", "schedule", "2026-03-05 08:00:00", "timezone", "Asia/Tokyo"}, api.SchedulePreview{
			ScheduleType: "once", Schedule: "2026-03-05 08:00:00", Timezone: "Asia/Tokyo",
			Next: []string{"2026-03-05T08:00:00+09:00"},
		}},
		{"once before after", []string{"schedule_type", "once", "schedule", "2026-01-01T00:00:00Z", "after", "2025-12-31T00:00:00Z"}, api.SchedulePreview{
			ScheduleType: "once", Schedule: "2026-01-01T00:00:00Z", Timezone: "UTC", Next: []string{"2026-01-01T00:00:00Z"},
		}},
		{"from a given instant", []string{"schedule", "0 0 12 L-2W * ?", "after", "2026-06-15T08:00:00+02:00", "n", "3"}, api.SchedulePreview{
			ScheduleType: "cron", Schedule: "0 0 12 L-2W * ?", Timezone: "UTC",
			Next: []string{"2026-06-29T12:00:00Z", "2026-07-29T12:00:00Z", "2026-08-28T12:00:00Z"},
		}},
		{"none", []string{"schedule_type", "none"}, api.SchedulePreview{
			ScheduleType: "none", Schedule: "", Timezone: "UTC", Next: []string{},
		}},
		{"year field runs out", []string{"schedule", "0 0 0 1 1 ? 2027-2028"}, api.SchedulePreview{
			ScheduleType: "cron", Schedule: "0 0 0 1 1 ? 2027-2028", Timezone: "UTC",
			Next: []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got api.SchedulePreview
			b.doJSON(http.MethodGet, previewPath(c.query...), b.token, nil, http.StatusOK, &got)
			require.Equal(t, c.want, got)
		})
	}

	t.Run("next is an array, never null", func(t *testing.T) {
		status, raw := b.do(http.MethodGet, previewPath("schedule_type", "none"), b.token, nil)
		require.Equal(t, http.StatusOK, status)
		require.Contains(t, string(raw), `"next":[]`)
	})

	t.Run("n up to the maximum", func(t *testing.T) {
		var got api.SchedulePreview
		b.doJSON(http.MethodGet, previewPath("schedule", "* * * * * ?", "n", "100"), b.token, nil, http.StatusOK, &got)
		require.Len(t, got.Next, api.MaxPreviewCount)
		require.Equal(t, "2026-03-01T12:01:40Z", got.Next[99])
		for i := 1; i < len(got.Next); i++ {
			a, err := time.Parse(time.RFC3339, got.Next[i-1])
			require.NoError(t, err)
			z, err := time.Parse(time.RFC3339, got.Next[i])
			require.NoError(t, err)
			require.Equal(t, time.Second, z.Sub(a))
		}
	})

	invalid := []struct {
		name   string
		query  []string
		fields map[string]string // field -> message fragment
	}{
		{"n too large", []string{"schedule", "* * * * *", "n", "101"}, map[string]string{"n": "from 1 to 100"}},
		{"n zero", []string{"schedule", "* * * * *", "n", "0"}, map[string]string{"n": "from 1 to 100"}},
		{"n not a number", []string{"schedule", "* * * * *", "n", "five"}, map[string]string{"n": "integer"}},
		{"empty schedule", []string{}, map[string]string{"schedule": "schedule is empty"}},
		{"quartz day-of-week out of range", []string{"schedule", "0 0 12 ? * 8"}, map[string]string{"schedule": `day-of-week: "8" is out of range 1-7`}},
		{"standard minute out of range", []string{"schedule", "61 * * * *"}, map[string]string{"schedule": `minute: "61" is out of range 0-59`}},
		{"never fires", []string{"schedule", "0 0 0 30 2 ?"}, map[string]string{"schedule": "never fires"}},
		{"once in the past", []string{"schedule_type", "once", "schedule", "2026-01-01T00:00:00Z"}, map[string]string{"schedule": "is in the past"}},
		{"years in the past", []string{"schedule", "0 0 0 1 1 ? 2020-2025"}, map[string]string{"schedule": "is in the past"}},
		{"only in a DST gap", []string{"schedule", "0 30 2 ? 3 1L", "timezone", "Europe/Berlin"}, map[string]string{"schedule": "daylight-saving gap of Europe/Berlin"}},
		{"step too large", []string{"schedule", "0 0/60 * * * ?"}, map[string]string{"schedule": "minute: step 60"}},
		{"bad after", []string{"schedule", "* * * * *", "after", "yesterday"}, map[string]string{"after": "RFC 3339"}},
		{"unknown parameter", []string{"schedule", "* * * * *", "count", "3"}, map[string]string{"count": "unknown query parameter"}},
		{"misspelt parameter", []string{"schedule", "* * * * *", "time_zone", "Asia/Tokyo"}, map[string]string{"time_zone": "unknown query parameter"}},
		{"bad interval", []string{"schedule_type", "fixed_rate", "schedule", "500ms"}, map[string]string{"schedule": "shorter than 1s"}},
		{"unknown zone", []string{"schedule", "* * * * *", "timezone", "Mars/Base"}, map[string]string{"timezone": `unknown time zone "Mars/Base"`}},
		{"Local is not a zone", []string{"schedule", "* * * * *", "timezone", "Local"}, map[string]string{"timezone": `unknown time zone "Local"`}},
		{"unknown type", []string{"schedule_type", "quartz", "schedule", "* * * * *"}, map[string]string{"schedule_type": `unknown schedule type "quartz"`}},
		{"every field at once", []string{"schedule", "0 0 12 ? * 0", "timezone", "Nowhere/Town", "n", "-1"}, map[string]string{
			"schedule": `day-of-week: "0" is out of range 1-7`, "timezone": `unknown time zone "Nowhere/Town"`, "n": "from 1 to 100",
		}},
	}
	for _, c := range invalid {
		t.Run(c.name, func(t *testing.T) {
			e := b.errorOf(http.MethodGet, previewPath(c.query...), b.token, nil, http.StatusBadRequest)
			require.Len(t, e.Fields, len(c.fields), "%+v", e)
			for f, frag := range c.fields {
				require.Contains(t, e.Fields[f], frag, "field %s", f)
			}
		})
	}
}

func TestSchedulePreviewAcrossDST(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.clock.Advance(27 * 24 * time.Hour) // 2026-03-28T12:00:00Z
	relogin(b)

	var got api.SchedulePreview
	b.doJSON(http.MethodGet, previewPath("schedule", "0 30 2 * * ?", "timezone", "Europe/Berlin", "n", "2"),
		b.token, nil, http.StatusOK, &got)
	// 02:30 on 2026-03-29 does not exist in Berlin: that day is skipped.
	require.Equal(t, []string{"2026-03-30T02:30:00+02:00", "2026-03-31T02:30:00+02:00"}, got.Next)

	b.clock.Advance(210 * 24 * time.Hour) // 2026-10-24T12:00:00Z
	relogin(b)
	b.doJSON(http.MethodGet, previewPath("schedule", "0 0/30 2 * * ?", "timezone", "Europe/Berlin", "n", "3"),
		b.token, nil, http.StatusOK, &got)
	// 02:00-02:59 happens twice on 2026-10-25: each time fires once, the first time.
	require.Equal(t, []string{"2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00", "2026-10-26T02:00:00+01:00"}, got.Next)
}

// relogin replaces b's token, which expires when the clock jumps ahead.
func relogin(b *bundle) {
	b.t.Helper()
	var login api.LoginResponse
	b.doJSON(http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": "admin", "password": adminPassword},
		http.StatusOK, &login)
	require.NotEmpty(b.t, login.Token)
	b.token = login.Token
}

// TestSchedulePreviewEndsWithTheYear9999: RFC 3339 has four-digit years,
// so the preview stops before the year 10000 (in the schedule's zone)
// instead of writing "10000-01-01T03:00:00Z"; an `after` past 9999 is a 400.
func TestSchedulePreviewEndsWithTheYear9999(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		query []string
		want  []string
	}{
		{[]string{"schedule", "0 3 * * *", "after", "9999-12-30T00:00:00Z", "n", "5"},
			[]string{"9999-12-30T03:00:00Z", "9999-12-31T03:00:00Z"}},
		{[]string{"schedule", "0 3 * * *", "after", "9999-12-31T23:59:59Z", "n", "5"}, []string{}},
		{[]string{"schedule", "0 3 * * *", "timezone", "Asia/Tokyo", "after", "9999-12-30T00:00:00Z", "n", "5"},
			[]string{"9999-12-31T03:00:00+09:00"}},
		{[]string{"schedule_type", "fixed_rate", "schedule", "86400", "after", "9999-12-30T12:00:00Z", "n", "5"},
			[]string{"9999-12-31T12:00:00Z"}},
	} {
		var got api.SchedulePreview
		b.doJSON(http.MethodGet, previewPath(tc.query...), b.token, nil, http.StatusOK, &got)
		require.Equal(t, tc.want, got.Next, "%v", tc.query)
		for _, s := range got.Next {
			_, err := time.Parse(time.RFC3339, s)
			require.NoError(t, err)
		}
	}
	e := b.errorOf(http.MethodGet, previewPath("schedule", "0 3 * * *", "after", "9999-12-31T23:00:00-05:00"), b.token,
		nil, http.StatusBadRequest)
	require.Contains(t, e.Fields["after"], "past the year 9999")
}
