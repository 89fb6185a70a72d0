#!/usr/bin/env bash
# Profile the fire path: run the http workload at RATE jobs/s for WINDOW s
# with the standalone's --pprof-addr, and once the jobs fire collect a CPU,
# block and mutex profile (PROFILE_SECONDS each, as deltas) and an execution
# trace of TRACE_SECONDS around a tick into OUT; then a heap profile
# (heap.pprof: inuse_space and alloc_space; heap.txt: the same with
# runtime.MemStats) and the standalone's /proc status and smaps_rollup (Go
# heap against non-heap RSS, e.g. etcd's bbolt mmap). See docs/performance.md.
set -euo pipefail
RATE=${RATE:-1000} WINDOW=${WINDOW:-60} PROFILE_SECONDS=${PROFILE_SECONDS:-30} TRACE_SECONDS=${TRACE_SECONDS:-2}
OUT=${OUT:-/tmp/cronix-profile} BIN=${BIN:-bin/cronix} PPROF=${PPROF:-127.0.0.1:6061}
mkdir -p "$OUT"
go build -o "$OUT/speed" ./bench/speed
"$OUT/speed" --binary "$BIN" --workloads http --http-rates "$RATE" --seconds "$WINDOW" --pprof-addr "$PPROF" --out '' \
  >"$OUT/bench.log" 2>&1 &
bench=$!
trap 'kill $bench 2>/dev/null || true' EXIT
# The jobs are created, then the window starts after the warm-up.
until grep -q "created $RATE jobs" "$OUT/bench.log"; do
  kill -0 $bench 2>/dev/null || { cat "$OUT/bench.log"; exit 1; }
  sleep 0.5
done
sleep 6 # into the measured window
base="http://$PPROF/debug/pprof"
curl -sf -o "$OUT/cpu.pprof" "$base/profile?seconds=$PROFILE_SECONDS" & c1=$!
curl -sf -o "$OUT/block.pprof" "$base/block?seconds=$PROFILE_SECONDS" & c2=$!
curl -sf -o "$OUT/mutex.pprof" "$base/mutex?seconds=$PROFILE_SECONDS" & c3=$!
wait $c1 $c2 $c3
# Memory at the end of the profiled stretch: the Go heap (after a GC) and
# the process's RSS split (anonymous vs file-backed such as bbolt's mmap).
pid=$(ss -ltnpH "sport = :${PPROF##*:}" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2 || true)
curl -sf -o "$OUT/heap.pprof" "$base/heap?gc=1"
curl -sf -o "$OUT/heap.txt" "$base/heap?debug=1"
if [ -n "$pid" ]; then
  { grep -E 'VmRSS|VmHWM|RssAnon|RssFile|RssShmem' "/proc/$pid/status"; cat "/proc/$pid/smaps_rollup"; } >"$OUT/rss.txt" || true
fi
# A trace starting just before a tick.
now=$(date +%s%N); sleep "0.$(printf '%09d' $(( 1000000000 - now % 1000000000 - 100000000 < 0 ? 0 : 1000000000 - now % 1000000000 - 100000000 )))"
curl -sf -o "$OUT/trace.out" "$base/trace?seconds=$TRACE_SECONDS"
wait $bench
trap - EXIT
cat "$OUT/bench.log"
echo "profiles in $OUT"
