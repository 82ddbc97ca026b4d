#!/usr/bin/env bash
# A program with no usable driver fails its first driver call with a cuda_error that says why; it never
# falls back to the sim, even where the sim is linked. The sim runs only when chosen, and only where it
# is linked. $1: first_driver_call without the sim; $2: the same program linked with the sim.
set -uo pipefail
without_sim="$1" with_sim="$2"
failures=0

# expect NAME STATUS TEXT... -- COMMAND...: the command's exit status and output (every TEXT in it).
expect() {
  local name="$1" status="$2" texts=()
  shift 2
  while [[ "$1" != "--" ]]; do texts+=("$1"); shift; done
  shift
  local output rc=0
  output="$("$@" 2>&1)" || rc=$?
  local ok=1
  [[ "$rc" == "$status" ]] || ok=0
  for text in "${texts[@]}"; do grep -qF -- "$text" <<<"$output" || ok=0; done
  if ((ok)); then
    echo "ok: $name"
  else
    echo "FAIL: $name: exit status $rc (expected $status); output: $output"
    failures=$((failures + 1))
  fi
}

absent=(env -u FERRY_BACKEND FERRY_CUDA_LIBRARY=libferry-no-such-driver.so.1)
expect "no driver, no FERRY_BACKEND: a cuda_error with the dlopen message" 1 \
  "cuda_error: cuDeviceGetCount failed with CUDA_ERROR_NOT_INITIALIZED" \
  "cannot load libferry-no-such-driver.so.1" "FERRY_BACKEND=sim selects the host simulation" \
  -- "${absent[@]}" "$without_sim"
expect "no driver, the sim linked but not chosen: still the cuda_error, no fallback" 1 \
  "cuda_error:" "cannot load libferry-no-such-driver.so.1" \
  -- "${absent[@]}" "$with_sim"
expect "FERRY_BACKEND=sim where the sim is not linked: says so" 1 \
  "cuda_error:" "FERRY_BACKEND=sim chose the sim backend, but this program does not link it" \
  -- env FERRY_BACKEND=sim "$without_sim"
expect "FERRY_BACKEND=auto names no backend" 1 \
  "cuda_error:" "FERRY_BACKEND=auto names no backend (expected cuda or sim)" \
  -- env FERRY_BACKEND=auto "$with_sim"
expect "FERRY_BACKEND=sim where the sim is linked: runs on it" 0 \
  "on the sim backend" \
  -- env FERRY_BACKEND=sim "$with_sim"
expect "select_backend(sim) in code, no FERRY_BACKEND: runs on the sim" 0 \
  "on the sim backend" \
  -- "${absent[@]}" "$with_sim" --select-sim

((failures == 0)) || exit 1
echo "all cases passed"
