#!/usr/bin/env bash
# Runs make targets one after another, stopping at the first that fails, and prints how long
# each took: `make test` is its phases (Makefile, TEST_PHASES), and a slow phase should show.
set -uo pipefail
make="${MAKE:-make}"
names=()
times=()
report() {
  echo
  echo "phase times:"
  for i in "${!names[@]}"; do printf '  %-14s %5d s\n' "${names[$i]}" "${times[$i]}"; done
  printf '  %-14s %5d s\n' "total" "$SECONDS"
}
for phase in "$@"; do
  start=$SECONDS
  echo "=== make $phase"
  "$make" --no-print-directory "$phase"
  status=$?
  names+=("$phase")
  times+=($((SECONDS - start)))
  if ((status != 0)); then
    report
    echo "make test: phase $phase failed (exit $status)" >&2
    exit "$status"
  fi
done
report
