package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime"
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
// own) sends the requests of each second to the bench's receiver the way
// the http plugin's burst path does, and nothing else: a keep-alive
// connection per request dialled ahead, each request serialised ahead
// (Request.Write, the same headers, naming the fire in X-Cronix-Fire-Id)
// with a goroutine waiting for its response, and at the second one loop
// per CPU writing its contiguous part (at least 64 requests a loop).
// Lateness is measured by the same receiver, so the Cronix/floor ratio
// says how close Cronix gets to this machine's own lateness for that many
// simultaneous requests.
func httpFloor(ctx context.Context, cfg config, rate, seconds int) (row, error) {
	rec, err := startReceiver(cfg)
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
	machine := startSampler(ctx, 0, time.Second, nil)
	if err := cmd.Run(); err != nil {
		machine.stop()
		return row{}, fmt.Errorf("http floor client: %w", err)
	}
	steal := machine.stop()
	var cpu time.Duration
	if st := cmd.ProcessState; st != nil {
		cpu = st.UserTime() + st.SystemTime()
	}
	samples := rec.snapshot(ids)
	r := row{Workload: "http floor (a client process, no scheduler)", Rate: fmt.Sprintf("%d/s", rate), Seconds: seconds,
		tally: tallySamples(samples, ids, start, end, cfg.bucket)}
	fired := rate * int(end.Sub(first)/time.Second)
	r.Notes = append(r.Notes, "a child process sends each second's requests as the http plugin's burst path does: a keep-alive "+
		"connection per request dialled ahead, the requests serialised 100 ms ahead, at the second one loop per CPU writing its part, "+
		"to the same receiver",
		fmt.Sprintf("client CPU per 1,000 fires: %.2f s", cpuPer1000(cpu.Seconds(), fired)))
	r.Socket = socketTally(samples, ids, start, end, cfg.bucket)
	r.takeSteal(steal, start, end)
	if err := r.noteSeconds(cfg, fmt.Sprintf("http-floor-%d", rate), samples); err != nil {
		return row{}, err
	}
	fmt.Printf("http floor %d/s: p50 %s p99 %s max %s missed %d; at the socket %s; %s\n", rate, ms(r.P50), ms(r.P99), ms(r.Max), r.Missed, r.socketCell(), r.stealBrief())
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
	u, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("%s: %w", floorClientEnv, err)
	}
	conns := make([]net.Conn, rate)
	readers := make([]*bufio.Reader, rate)
	for i := range conns {
		if conns[i], err = net.Dial("tcp", u.Host); err != nil {
			return fmt.Errorf("http floor: dial: %w", err)
		}
		defer conns[i].Close()
		readers[i] = bufio.NewReader(conns[i])
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed int
	)
	fail := func() {
		mu.Lock()
		failed++
		mu.Unlock()
	}
	wires := make([][]byte, rate)
	for at := first; at.Before(end); at = at.Add(time.Second) {
		time.Sleep(time.Until(at.Add(-100 * time.Millisecond))) // the floor's own pacing, as a scheduler's timer
		wg.Wait()                                               // the previous second's responses
		fire := strconv.FormatInt(at.UnixMilli(), 10)
		for i := range rate {
			req, err := http.NewRequest(http.MethodGet, base+"/j/"+strconv.Itoa(i), nil)
			if err != nil {
				return err
			}
			req.Header.Set(fireIDHeader, strconv.Itoa(i)+"-"+fire)
			var buf bytes.Buffer
			if err := req.Write(&buf); err != nil {
				return err
			}
			wires[i] = buf.Bytes()
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.ReadResponse(readers[i], req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
				if err != nil {
					fail()
				}
			}()
		}
		time.Sleep(time.Until(at))
		// As the plugin: one loop per CPU, each writing a contiguous part.
		w := max(1, min(runtime.GOMAXPROCS(0), rate/64))
		per := (rate + w - 1) / w
		var writers sync.WaitGroup
		for start := 0; start < rate; start += per {
			writers.Go(func() {
				for i := start; i < min(start+per, rate); i++ {
					if _, err := conns[i].Write(wires[i]); err != nil {
						_ = conns[i].Close() // its reader fails and counts it
					}
				}
			})
		}
		writers.Wait()
	}
	wg.Wait()
	if failed > 0 {
		return fmt.Errorf("%d floor requests failed", failed)
	}
	return nil
}
