#!/usr/bin/env bash
# Where the CPU goes within the second: record every process on the machine
# with perf (software clock, wall-clock timestamps) for SECONDS while a
# workload runs (start one first, e.g. bench/speed at 3,000 http jobs/s),
# then count the samples per BUCKET ms of offset in the second, by process
# name, and, for each PATTERN given (a function name, e.g. 'loop).commit'),
# the samples whose stack holds it. About 1,000 samples per 50 ms means both
# cores busy. Needs perf (Debian's linux-perf). See docs/performance.md
# ("stop 25").
# RECORDED=1 counts OUT/perf.txt of an earlier recording again.
#   SECONDS_=10 BUCKET=50 bash bench/speed/phase.sh 'loop).commit' 'postResults'
set -euo pipefail
SECONDS_=${SECONDS_:-10} BUCKET=${BUCKET:-50} OUT=${OUT:-/tmp/cronix-phase}
mkdir -p "$OUT"
if [ "${RECORDED:-}" != 1 ]; then
  perf record -q -e cpu-clock -F 997 -a -g -k CLOCK_REALTIME -o "$OUT/perf.data" -- sleep "$SECONDS_" 2>/dev/null
  perf script -i "$OUT/perf.data" -F comm,pid,tid,time,ip,sym --ns 2>/dev/null >"$OUT/perf.txt"
fi
count() { # $1: pattern ('' = by process)
  awk -v W="$BUCKET" -v pat="$1" '
    function flush() { if (have && (pat == "" || hit)) { k = (pat == "" ? comm : pat); n[b, k]++; keys[k] = 1 } }
    /^[[:space:]]*[^[:space:]].* [0-9]+\/[0-9]+ +[0-9]+\.[0-9]+:/ {
      flush(); have = 1; hit = 0
      match($0, /[0-9]+\/[0-9]+ +[0-9]+\.[0-9]+:/); hdr = substr($0, RSTART, RLENGTH)
      comm = substr($0, 1, RSTART - 1); gsub(/^[[:space:]]+|[[:space:]]+$/, "", comm)
      split(hdr, f, "."); b = int(substr(f[2], 1, 3) / W) * W; next
    }
    pat != "" && index($0, pat) { hit = 1 }
    END {
      flush()
      for (b = 0; b < 1000; b += W) {
        line = sprintf("%4d ms", b)
        for (k in keys) if (n[b, k] > 0 && (pat != "" || n[b, k] >= 20)) line = line sprintf("  %s %d", k, n[b, k])
        print line
      }
    }' "$OUT/perf.txt"
}
echo "== samples per ${BUCKET} ms of the second, by process (20 or more)"
count ''
for p in "$@"; do
  echo "== samples per ${BUCKET} ms whose stack holds $p"
  count "$p"
done
