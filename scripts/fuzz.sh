#!/usr/bin/env bash
# fuzz.sh TARGET PACKAGE FUZZTIME — bounded fuzzing of one target (make test).
#
# Go 1.26's fuzz coordinator can end a duration-bounded run (-fuzztime=15s)
# with a bare "context deadline exceeded" failure when the deadline fires
# while a worker is mid-call (go.dev/issue/75804, fixed in Go 1.27). That
# failure found nothing: no input was written. This script runs the target
# once more in that case only, and fails as go test does otherwise:
#   - a failing input written (testdata/fuzz/TARGET/…) or any other failure
#     output: fail at once, no retry;
#   - exactly the deadline flake, twice in a row: fail.
set -uo pipefail

target=${1:?usage: fuzz.sh TARGET PACKAGE FUZZTIME}
pkg=${2:?usage: fuzz.sh TARGET PACKAGE FUZZTIME}
fuzztime=${3:?usage: fuzz.sh TARGET PACKAGE FUZZTIME}
GO=${GO:-go}

# is_deadline_flake LOG: the run failed with the coordinator's deadline
# message and nothing else that a real finding prints.
is_deadline_flake() {
  grep -q 'context deadline exceeded' "$1" &&
    ! grep -qE 'Failing input written to|panic:|_test\.go:[0-9]+:|fuzzing process hung|terminated unexpectedly' "$1"
}

log=$(mktemp)
trap 'rm -f "$log"' EXIT
for try in 1 2; do
  "$GO" test -run '^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -eq 0 ]; then
    exit 0
  fi
  if [ "$try" -eq 1 ] && is_deadline_flake "$log"; then
    echo "fuzz.sh: $target ended on Go's fuzztime deadline race (go.dev/issue/75804) with no failing input; running it once more" >&2
    continue
  fi
  exit "$rc"
done
