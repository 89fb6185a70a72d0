//go:build !linux

package pluginhost

import "os/exec"

// No parent-death signal here: plugins of a crashed node are not killed.

func setParentDeathSignal(*exec.Cmd) {}

type spawner struct{}

func newSpawner() *spawner { return &spawner{} }

func (*spawner) do(f func()) { f() }

func (*spawner) close() {}
