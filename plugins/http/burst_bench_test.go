package http

import (
	"encoding/json"
	"fmt"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cronix/cronix/pluginapi"
)

// BenchmarkSecond: n runs due at one instant, all to one receiver (in this
// process), through the burst path (called 100 ms early, as the SDK does
// for an EarlyRunner) or the normal one (called at the instant, as the SDK
// calls other handlers). Reports the lateness of the requests' arrival at
// the receiver after the instant, p50 and p99 in ms. Connections are warm
// (one round before the timer starts).
//
//	go test ./plugins/http -run '^$' -bench BenchmarkSecond -benchtime 10x
func BenchmarkSecond(b *testing.B) {
	for _, n := range []int{1000, 3000} {
		for _, path := range []string{"normal", "burst"} {
			b.Run(fmt.Sprintf("%s/%d", path, n), func(b *testing.B) { benchSecond(b, n, path == "burst") })
		}
	}
}

func benchSecond(b *testing.B, n int, burst bool) {
	var (
		mu  sync.Mutex
		at  time.Time
		lat []time.Duration
	)
	srv := httptest.NewUnstartedServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		now := time.Now()
		mu.Lock()
		lat = append(lat, now.Sub(at))
		mu.Unlock()
		w.WriteHeader(nethttp.StatusNoContent)
	}))
	srv.Config.MaxHeaderBytes = 1 << 16
	srv.Start()
	defer srv.Close()
	h, _ := NewWithOptions(Options{Guard: Guard{AllowLoopback: true}}).(*handler)
	defer func() { _ = h.Close() }()
	params, _ := json.Marshal(map[string]any{"url": srv.URL + "/x"})
	round := func() {
		mu.Lock()
		at = time.Now().Add(300 * time.Millisecond)
		start := at
		mu.Unlock()
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				req := pluginapi.Request{FireID: fmt.Sprintf("1-%d", i), JobID: 1, Params: params}
				time.Sleep(time.Until(start.Add(-100 * time.Millisecond)))
				if burst {
					req.StartAt = start
				} else {
					time.Sleep(time.Until(start))
				}
				res, err := h.Run(b.Context(), req, io.Discard)
				if err != nil || res.Status != pluginapi.StatusSuccess {
					b.Errorf("run %d: %+v %v", i, res, err)
				}
			})
		}
		wg.Wait()
	}
	round() // warm the connections
	mu.Lock()
	lat = lat[:0]
	mu.Unlock()
	b.ResetTimer()
	for range b.N {
		round()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
