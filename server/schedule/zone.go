package schedule

import (
	"os"
	"path/filepath"
	"strings"
	"time"
)

// HostZone is the host's time zone under its IANA name (from $TZ, else the
// /etc/localtime link), so a default zone shows as "Europe/Berlin" rather
// than "Local". It falls back to time.Local when the name cannot be found.
func HostZone() *time.Location {
	if tz, ok := os.LookupEnv("TZ"); ok {
		tz = strings.TrimPrefix(tz, ":")
		if tz == "" {
			return time.UTC
		}
		if loc, err := time.LoadLocation(tz); err == nil && tz != "Local" {
			return loc
		}
		return time.Local
	}
	if target, err := filepath.EvalSymlinks("/etc/localtime"); err == nil {
		if _, name, ok := strings.Cut(target, "zoneinfo/"); ok {
			if loc, err := time.LoadLocation(name); err == nil {
				return loc
			}
		}
	}
	return time.Local
}
