// Package benchreport holds what the benchmark programs share: percentiles,
// the machine line, counting handler executions from an execution log,
// updating one section of docs/benchmarks.md between markers, and the HTTP
// receiver of the http jobs (Receiver).
package benchreport

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Percentiles returns p50, p99 and max of ds (sorting ds in place).
func Percentiles(ds []time.Duration) (p50, p99, maxd time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	n := len(ds)
	if n == 0 {
		return 0, 0, 0
	}
	return ds[n/2], ds[min(n-1, n*99/100)], ds[n-1]
}

// Machine describes this machine: cores, CPU model, memory, Go version.
func Machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		cpu = cpuModel(string(b))
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		_, _ = fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %f kB", &kb)
		mem = fmt.Sprintf(", %.0f GiB RAM", kb/1024/1024)
	}
	return fmt.Sprintf("%d cores (%s)%s, %s %s/%s", runtime.NumCPU(), cpu, mem, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// cpuModel names the first CPU of a /proc/cpuinfo: its model name and, as
// virtual machines often give a bare one ("AMD EPYC") for CPUs of quite
// different speeds, its family and model numbers.
func cpuModel(cpuinfo string) string {
	fields := map[string]string{}
	for _, line := range strings.Split(cpuinfo, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			if len(fields) > 0 && strings.TrimSpace(line) == "" {
				break // the end of the first processor's block
			}
			continue
		}
		k = strings.TrimSpace(k)
		if _, seen := fields[k]; !seen {
			fields[k] = strings.TrimSpace(v)
		}
	}
	name := fields["model name"]
	if name == "" {
		return "unknown CPU"
	}
	if fam, model := fields["cpu family"], fields["model"]; fam != "" && model != "" {
		name += ", family " + fam + " model " + model
	}
	return name
}

// CountExecutions counts the lines (fire ids) of an execution log that keep
// accepts (nil keeps all).
func CountExecutions(path string, keep func(fireID string) bool) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		id := strings.TrimSpace(sc.Text())
		if id != "" && (keep == nil || keep(id)) {
			counts[id]++
		}
	}
	return counts, sc.Err()
}

// UpdateSection replaces the text between "<!-- name:begin -->" and
// "<!-- name:end -->" in the Markdown file at path, creating the file or
// appending the section when missing.
func UpdateSection(path, name, report string) error {
	begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	doc := string(b)
	if doc == "" {
		doc = "# Benchmarks\n\nFigures written by `make bench` on the machine named in each section.\n"
	}
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		doc = strings.TrimRight(doc, "\n") + "\n\n" + begin + "\n" + end + "\n"
		i, j = strings.Index(doc, begin), strings.Index(doc, end)
	}
	doc = doc[:i+len(begin)] + "\n" + report + doc[j:]
	return os.WriteFile(path, []byte(doc), 0o644)
}
