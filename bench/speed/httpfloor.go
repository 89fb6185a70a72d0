package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// floorClientEnv makes this binary the http floor's client (floorClient):
// "<base URL>,<rate>,<first second ms>,<end ms>".
const floorClientEnv = "CRONIX_BENCH_HTTP_FLOOR_CLIENT"

// httpFloor is the http workload without a scheduler: a child process of
// the bench (this binary again, as the http plugin is a process of its
// own) calls the bench's receiver rate times at each second, as the http
// plugin does for fires handed over ahead of their time: one goroutine per
// request, handed over 100 ms early and waiting on a timer for its second,
// then a GET on a keep-alive client with the plugin's pool sizes, naming
// the fire in X-Cronix-Fire-Id. Lateness is measured by the same receiver,
// so the Cronix/floor ratio says how close Cronix gets to this machine's
// own lateness for that many simultaneous requests.
func httpFloor(ctx context.Context, cfg config, rate, seconds int) (row, error) {
	rec, err := startReceiver()
	if err != nil {
		return row{}, err
	}
	defer rec.Close()
	self, err := os.Executable()
	if err != nil {
		return row{}, fmt.Errorf("http floor: %w", err)
	}
	ids := make([]int64, rate)
	for i := range ids {
		ids[i] = int64(i)
	}
	start, end := window(cfg, seconds)
	first := start.Add(-cfg.warmup + time.Second)
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d,%d", floorClientEnv, rec.URL(""), rate, first.UnixMilli(), end.UnixMilli()))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return row{}, fmt.Errorf("http floor client: %w", err)
	}
	var cpu time.Duration
	if st := cmd.ProcessState; st != nil {
		cpu = st.UserTime() + st.SystemTime()
	}
	r := row{Workload: "http floor (a client process, no scheduler)", Rate: fmt.Sprintf("%d/s", rate), Seconds: seconds,
		tally: tallySamples(rec.snapshot(ids), ids, start, end, cfg.bucket)}
	fired := rate * int(end.Sub(first)/time.Second)
	r.Notes = append(r.Notes, "a child process starts one goroutine per request 100 ms before its second, each waits on a timer "+
		"for the second, then a GET on a keep-alive client with the http plugin's pool sizes, to the same receiver",
		fmt.Sprintf("client CPU per 1,000 fires: %.2f s", cpuPer1000(cpu.Seconds(), fired)))
	fmt.Printf("http floor %d/s: p50 %s p99 %s max %s missed %d\n", rate, ms(r.P50), ms(r.P99), ms(r.Max), r.Missed)
	return r, nil
}

// floorClient is the http floor's client process (see httpFloor); spec is
// the value of floorClientEnv.
func floorClient(spec string) error {
	parts := strings.Split(spec, ",")
	if len(parts) != 4 {
		return fmt.Errorf("%s=%q: want <url>,<rate>,<first ms>,<end ms>", floorClientEnv, spec)
	}
	base := parts[0]
	var nums [3]int64
	for i, p := range parts[1:] {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", floorClientEnv, err)
		}
		nums[i] = n
	}
	rate, first, end := int(nums[0]), time.UnixMilli(nums[1]), time.UnixMilli(nums[2])
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: 8192, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 30 * time.Second,
	}}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed int
	)
	for at := first; at.Before(end); at = at.Add(time.Second) {
		time.Sleep(time.Until(at.Add(-100 * time.Millisecond))) // the floor's own pacing, as a scheduler's timer
		fire := strconv.FormatInt(at.UnixMilli(), 10)
		for i := range rate {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-time.NewTimer(time.Until(at)).C
				req, err := http.NewRequest(http.MethodGet, base+"/j/"+strconv.Itoa(i), nil)
				if err == nil {
					req.Header.Set(fireIDHeader, strconv.Itoa(i)+"-"+fire)
					var resp *http.Response
					if resp, err = client.Do(req); err == nil {
						_ = resp.Body.Close()
					}
				}
				if err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if failed > 0 {
		return fmt.Errorf("%d floor requests failed", failed)
	}
	return nil
}
