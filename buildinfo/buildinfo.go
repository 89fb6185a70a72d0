// Package buildinfo carries the version of the cronix binary, set at link
// time with -ldflags "-X github.com/cronix/cronix/buildinfo.Version=...".
package buildinfo

import "runtime/debug"

// Version of this build; "dev" unless set by the linker or a module version.
var Version = "dev"

// String returns the version, falling back to the VCS revision when known.
func String() string {
	if Version != "dev" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return Version
}
