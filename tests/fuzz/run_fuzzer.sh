#!/usr/bin/env bash
# Builds the argument fuzzer (build_fuzzer.sh) and runs it for SECONDS from the committed corpus
# (tests/fuzz/corpus, read-only: new inputs go to a scratch folder). Ends with one line:
#   fuzz: <executions> executions in <seconds> s, corpus <inputs> inputs, coverage <edges> edges, <crashes> crashes
# and exits non-zero if the fuzzer found a crash (the input is kept in .fuzz-build/artifacts/).
# With --merge, tests/fuzz/corpus is replaced by the minimized union of itself and the new inputs.
# Usage: tests/fuzz/run_fuzzer.sh SECONDS [--merge]
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."

seconds="${1:?usage: tests/fuzz/run_fuzzer.sh SECONDS [--merge]}"
merge="${2:-}"
fuzzer="$(tests/fuzz/build_fuzzer.sh | tail -n 1)"
corpus=tests/fuzz/corpus
work="$(mktemp -d "${TMPDIR:-/tmp}/ferry-fuzz.XXXXXX")"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/new" .fuzz-build/artifacts

# The engine's threads and the sim's allocations are set up once, before the first input; an input
# that leaks is caught by the harness (sim usage), not by LeakSanitizer, whose exit-time check would
# see the deliberately immortal world. -timeout: an engine op that never completes is a hang, a finding.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
rc=0
"$fuzzer" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
  -artifact_prefix=.fuzz-build/artifacts/ "$work/new" "$corpus" > "$work/log" 2>&1 || rc=$?

executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)"
coverage="$(grep -oE 'cov: [0-9]+' "$work/log" | tail -n 1 | cut -d' ' -f2)"
inputs="$(grep -oE 'corp: [0-9]+' "$work/log" | tail -n 1 | cut -d' ' -f2)"
crashes=0
if ((rc != 0)); then
  crashes=1
  echo "run_fuzzer: the fuzzer stopped with status $rc; its log ends:" >&2
  grep -v -E '^#[0-9]+ +(NEW|REDUCE|pulse)|NEW_FUNC' "$work/log" | tail -n 40 >&2
fi
if [[ "$merge" == "--merge" && $rc -eq 0 ]]; then
  # Minimized afresh over the old and the new inputs: the fewest that keep every edge reached (hit
  # counts are not kept: -use_counters=0, which takes the corpus from thousands of files to about 1,000).
  mkdir "$work/merged"
  "$fuzzer" -merge=1 -use_counters=0 "$work/merged" "$corpus" "$work/new" >> "$work/log" 2>&1
  rm -f "$corpus"/*
  cp "$work/merged"/* "$corpus"/
  echo "run_fuzzer: corpus now $(ls "$corpus" | wc -l) inputs ($(du -sk "$corpus" | cut -f1) KiB)" >&2
fi
echo "fuzz: ${executions:-0} executions in $seconds s, corpus ${inputs:-0} inputs, coverage ${coverage:-0} edges, $crashes crashes"
exit "$rc"
