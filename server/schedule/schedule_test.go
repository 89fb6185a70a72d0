package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNext(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		expr string
		want time.Time
	}{
		{"*/1 * * * * *", base.Add(time.Second)},
		{"*/10 * * * * *", base.Add(10 * time.Second)},
		{"* * * * *", base.Add(time.Minute)},
		{"0 12 * * *", time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)},
		{"@hourly", base.Add(time.Hour)},
		{"@daily", time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)},
		{"@every 5s", base.Add(5 * time.Second)},
	}
	for _, c := range cases {
		s, err := Parse(TypeCron, c.expr, "UTC", nil)
		require.NoError(t, err, c.expr)
		require.Equal(t, c.want, s.Next(base).UTC(), c.expr)
	}
}

func TestTimezone(t *testing.T) {
	t.Parallel()
	s, err := Parse(TypeCron, "0 9 * * *", "Asia/Shanghai", nil)
	require.NoError(t, err)
	got := s.Next(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	require.Equal(t, time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC), got.UTC())
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{"", "bogus", "61 * * * *", "* * * * * * * *", "@every 10ms", "@every x", "0 0 30 2 *", "TZ=UTC * * * * *"} {
		_, err := Parse(TypeCron, expr, "", time.UTC)
		require.Error(t, err, expr)
	}
	_, err := Parse(TypeCron, "* * * * *", "Mars/Base", nil)
	require.ErrorContains(t, err, "time zone")
	_, err = Parse("quartz", "* * * * *", "", nil)
	require.ErrorContains(t, err, "schedule type")
}
