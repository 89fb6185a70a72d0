// Package sysinfo answers system-info requests for a node (seed 000): a
// replica puts /Cronix/system/switch/<node>; the node's Responder sees the
// PUT, collects CPU, memory, disk, load, host name and uptime with gopsutil,
// and writes the answer (cluster.SystemInfo JSON) to
// /Cronix/system/get/<node> under a fresh 5-minute lease.
//
// Guarantees: every PUT of the switch key seen by the watch gets one fresh
// answer written after it (also a switch key present when the Responder
// starts). A metric gopsutil cannot read is left zero and named in
// SystemInfo.Errors rather than failing the answer. Not guaranteed: answers
// to PUTs made while the node is down (the replica times out instead).
package sysinfo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/disk"
	"github.com/shirou/gopsutil/v4/host"
	"github.com/shirou/gopsutil/v4/load"
	"github.com/shirou/gopsutil/v4/mem"

	"github.com/cronix/cronix/cluster"
)

// cpuSample is how long CPU use is measured for one answer.
const cpuSample = 200 * time.Millisecond

// Collect reads the machine's state now; disks lists the paths whose file
// systems are reported ("/" is always included, duplicates are dropped).
// Metrics that cannot be read are recorded in Errors.
func Collect(ctx context.Context, nodeUUID string, disks ...string) cluster.SystemInfo {
	info := cluster.SystemInfo{Node: nodeUUID, OS: runtime.GOOS, CollectedAt: time.Now().UTC()}
	fail := func(what string, err error) {
		info.Errors = append(info.Errors, fmt.Sprintf("%s: %v", what, err))
	}
	if hi, err := host.InfoWithContext(ctx); err == nil {
		info.Hostname, info.Platform, info.UptimeSeconds = hi.Hostname, hi.Platform, hi.Uptime
	} else {
		fail("host", err)
		info.Hostname, _ = os.Hostname()
	}
	if n, err := cpu.CountsWithContext(ctx, true); err == nil {
		info.CPUCount = n
	} else {
		fail("cpu count", err)
		info.CPUCount = runtime.NumCPU()
	}
	if p, err := cpu.PercentWithContext(ctx, cpuSample, false); err == nil && len(p) > 0 {
		info.CPUPercent = p[0]
	} else {
		fail("cpu percent", errors.Join(err, errors.New("no sample")))
	}
	if vm, err := mem.VirtualMemoryWithContext(ctx); err == nil {
		info.MemoryTotal, info.MemoryUsed, info.MemoryPercent = vm.Total, vm.Used, vm.UsedPercent
	} else {
		fail("memory", err)
	}
	if avg, err := load.AvgWithContext(ctx); err == nil {
		info.Load1, info.Load5, info.Load15 = avg.Load1, avg.Load5, avg.Load15
	} else {
		fail("load", err)
	}
	seen := map[string]bool{}
	for _, p := range append([]string{"/"}, disks...) {
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		u, err := disk.UsageWithContext(ctx, p)
		if err != nil {
			fail("disk "+p, err)
			continue
		}
		info.Disks = append(info.Disks, cluster.DiskUsage{
			Path: p, Total: u.Total, Used: u.Used, Free: u.Free, UsedPercent: u.UsedPercent,
		})
	}
	return info
}
