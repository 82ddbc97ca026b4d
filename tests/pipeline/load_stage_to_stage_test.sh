#!/usr/bin/env bash
# pipeline_load --stage-to-stage starts the second stage as a process of its own (--serve-as-next-stage),
# drives the two stages with forward, then one server with transform, checks every reply, writes its
# report and exits 0; the second stage prints its metrics as it stops, and no process of it is left. A second stage whose standard input is
# closed at once stops by itself with status 0.
set -uo pipefail
load_binary="$1"
work="${TEST_TMPDIR:-/tmp}/stage-to-stage"
mkdir -p "$work"

"$load_binary" --stage-to-stage --seconds 1 --connections 2 --client-threads 1 --server-threads 1 \
  --min-bytes 4096 --max-bytes 65536 --out "$work" > "$work/load.log" 2>&1
status=$?
if [[ $status -ne 0 ]]; then
  echo "FAIL: pipeline_load --stage-to-stage exited $status:"; cat "$work/load.log"; exit 1
fi
report="$(ls "$work"/*-stage-to-stage.json 2>/dev/null | head -n 1)"
if [[ -z "$report" ]] || ! grep -q '"pipeline_stage_to_stage_throughput"' "$report"; then
  echo "FAIL: no stage-to-stage report with pipeline_stage_to_stage_throughput in $work:"; ls "$work"
  cat "$work/load.log"; exit 1
fi
# A forward is ok only with the second stage's checksum, which the load generator checks.
if ! grep -q 'pipeline_requests_total{stage="ferry",operation="forward",status="ok"} [1-9]' "$work/load.log"; then
  echo "FAIL: no forward answered ok:"; cat "$work/load.log"; exit 1
fi
# The first stage's metrics, the second stage's (printed by its process as it stops), the single server's.
blocks="$(grep -c '^# TYPE pipeline_requests_total counter' "$work/load.log")"
if [[ "$blocks" -ne 3 ]]; then
  echo "FAIL: $blocks blocks of metrics, not 3 (first stage, second stage, single server):"; cat "$work/load.log"
  exit 1
fi
if pgrep -f -- "--serve-as-next-stage" > /dev/null; then
  echo "FAIL: a second-stage process outlived pipeline_load"; exit 1
fi

"$load_binary" --serve-as-next-stage --server-threads 1 --max-bytes 65536 < /dev/null > "$work/child.out" 2>&1
status=$?
if [[ $status -ne 0 ]] || ! grep -q '^stage-port [1-9][0-9]*$' "$work/child.out"; then
  echo "FAIL: --serve-as-next-stage with standard input closed: status $status, output:"; cat "$work/child.out"
  exit 1
fi
echo "ok: two stages driven, report written, the second stage's process gone"
