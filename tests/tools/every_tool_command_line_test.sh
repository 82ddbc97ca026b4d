#!/usr/bin/env bash
# Every tool and benchmark (the arguments: their binaries) answers --help with its usage and status 0,
# without touching the driver, and refuses an unknown flag with status 2 and a message naming it.
set -uo pipefail
out="${TEST_TMPDIR:-/tmp}"
failures=0
for tool in "$@"; do
  name="$(basename "$tool")" before=$failures
  env -u FERRY_BACKEND "$tool" --help > "$out/help.txt" 2> "$out/help.err"
  status=$?
  if [[ $status -ne 0 ]] || ! grep -q "^usage: $name " "$out/help.txt"; then
    echo "FAIL $name --help: status $status (expected 0), output:"; cat "$out/help.txt" "$out/help.err"
    failures=$((failures + 1))
  fi
  "$tool" --no-such-flag=1 > "$out/unknown.txt" 2> "$out/unknown.err"
  status=$?
  if [[ $status -ne 2 ]] || ! grep -q "unknown flag '--no-such-flag'" "$out/unknown.err"; then
    echo "FAIL $name --no-such-flag=1: status $status (expected 2), stderr:"; cat "$out/unknown.err"
    failures=$((failures + 1))
  fi
  [[ $failures -eq $before ]] && echo "ok   $name"
done
exit $((failures > 0))
