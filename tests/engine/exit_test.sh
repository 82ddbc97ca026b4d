#!/usr/bin/env bash
# Runs the program that exits with engines alive: it must exit 0 within the time limit and report no
# driver call after the driver's teardown.
set -uo pipefail
program="$1"
output="$(timeout 60 "$program" 2>&1)"
status=$?
echo "$output"
if [[ $status -ne 0 ]]; then
  echo "FAIL: exit status $status (124: it hung)"
  exit 1
fi
if grep -q "called after the driver was torn down" <<<"$output"; then
  echo "FAIL: a driver call came after the driver's teardown at exit"
  exit 1
fi
echo "ok: exited cleanly"
