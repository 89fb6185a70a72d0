package schedule

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHostZoneNamesTheZone: with $TZ set, the host zone carries its IANA
// name, never "Local".
func TestHostZoneNamesTheZone(t *testing.T) {
	t.Setenv("TZ", "Asia/Tokyo")
	require.Equal(t, "Asia/Tokyo", HostZone().String())
	t.Setenv("TZ", "")
	require.Equal(t, "UTC", HostZone().String())
	t.Setenv("TZ", ":Europe/Berlin")
	require.Equal(t, "Europe/Berlin", HostZone().String())
}
