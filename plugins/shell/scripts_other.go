//go:build !unix

package shell

// pidAlive cannot tell here: a stale script directory is left alone.
func pidAlive(int) bool { return true }
