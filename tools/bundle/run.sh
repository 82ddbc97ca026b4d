#!/usr/bin/env bash
# Runs ferry's GPU bundle on the GPU machine: `.gpu-bundle/run.sh OUTDIR`.
# (`tools/ferry bundle` copies this file from tools/bundle/run.sh; edit it there.)
#
# Needs only bash, coreutils, awk, tar and gzip: no Bazel, no Boost, no Python, no network (UCX
# travels in ucx/, put on the loader path here).
#   1. every tests/<name> with FERRY_BACKEND=cuda (Boost.Test JUnit + log per binary), plus the
#      env and args attributes of its Bazel target (test-settings.sh; they win over FERRY_BACKEND);
#   2. every tests/<name> under compute-sanitizer, once per tool in RUN_SANITIZERS;
#   3. every bench/<name> with FERRY_BACKEND=cuda (and --out OUTDIR/bench where it writes a report);
#   4. a summary table, printed last and written to OUTDIR/summary.txt.
#
# Only a few files come back from OUTDIR, so it holds just:
#   OUTDIR/summary.txt     the table, then the details of whatever failed;
#   OUTDIR/logs.tar.gz     logs/tests/<name>.{xml,log}, logs/sanitizer/<tool>-<name>.{log,xml},
#                          logs/bench/<name>.log, logs/machine.txt;
#   OUTDIR/bench/...       whatever the benchmark binaries write there (JSON, table, plot).
# Both summary.txt and logs.tar.gz are rewritten after every binary, so a run cut short still
# leaves what it had done. RUN_KEEP_LOGS=1 also leaves the logs unpacked in OUTDIR/logs/.
#
# Environment (all optional):
#   RUN_SANITIZERS          compute-sanitizer tools, space-separated; default "memcheck";
#                           e.g. "memcheck synccheck racecheck initcheck"; "" for none.
#   RUN_BUDGET_S            wall-clock budget for the whole run (default 540; 0 = none). A step that
#                           would start with too little time left is reported as not run.
#   RUN_BENCH_RESERVE_S     budget kept for the benchmarks while sanitizing (default 180).
#   RUN_TEST_TIMEOUT_S      per test binary (default 300); RUN_SANITIZER_TIMEOUT_S (default 600);
#   RUN_BENCH_TIMEOUT_S     per benchmark binary (default 600).
#   RUN_SANITIZER_API_ERRORS  compute-sanitizer's --report-api-errors: "no" (default: driver
#                           calls that return an error, which ferry's tests provoke on purpose,
#                           are not counted), "explicit" or "all" to count them.
#   RUN_ONLY                a regular expression: run only the binaries whose name matches it.
#   COMPUTE_SANITIZER       path of compute-sanitizer (default: PATH, then /usr/local/cuda/bin).
# Exit status: 0 when every test case passed, no sanitizer reported an error, every benchmark
# exited 0 and nothing was left out for time; 1 otherwise; 2 for bad usage.
set -uo pipefail

usage() {
  sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[[ $# -eq 1 && "$1" != -h && "$1" != --help && -n "$1" ]] || usage

BUNDLE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# UCX's libraries (ferry::remote's programs link libucp.so.0 and its siblings), and the libraries the
# wheel ships for ucx_perftest; UCX finds its transport modules in ucx/lib/ucx beside libucs.
export LD_LIBRARY_PATH="$BUNDLE/ucx/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FERRY_UCX_PERFTEST="$BUNDLE/ucx/bin/ucx_perftest"
mkdir -p "$1" || exit 2
OUTDIR="$(cd "$1" && pwd)"
SANITIZERS="${RUN_SANITIZERS-memcheck}"
BUDGET="${RUN_BUDGET_S:-540}"
BENCH_RESERVE="${RUN_BENCH_RESERVE_S:-180}"
TEST_TIMEOUT="${RUN_TEST_TIMEOUT_S:-300}"
SAN_TIMEOUT="${RUN_SANITIZER_TIMEOUT_S:-600}"
BENCH_TIMEOUT="${RUN_BENCH_TIMEOUT_S:-600}"
ONLY="${RUN_ONLY:-}"
API_ERRORS="${RUN_SANITIZER_API_ERRORS:-no}"
START="$(date +%s)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ferry-run.XXXXXX")"
LOGS="$WORK/logs"
mkdir -p "$LOGS/tests" "$LOGS/sanitizer" "$LOGS/bench" "$WORK/tmp" "$OUTDIR/bench"
rm -f "$OUTDIR/summary.txt" "$OUTDIR/logs.tar.gz"

list_binaries() {  # folder -> names of the executables in it, but the programs tests run (helpers.txt)
  local f
  for f in "$BUNDLE/$1"/*; do
    [[ -f "$f" && -x "$f" ]] || continue
    f="${f##*/}"
    [[ -f "$BUNDLE/helpers.txt" ]] && grep -qxF "$f" "$BUNDLE/helpers.txt" && continue
    [[ -z "$ONLY" || "$f" =~ $ONLY ]] && printf '%s\n' "$f"
  done
}
# The tests' env and args attributes from their BUILD files (written by tools/ferry bundle).
declare -A TEST_ENV=() TEST_ARGS=()
if [[ -f "$BUNDLE/test-settings.sh" ]]; then
  # shellcheck source=/dev/null
  source "$BUNDLE/test-settings.sh"
fi
mapfile -t TESTS < <(list_binaries tests)
mapfile -t BENCHES < <(list_binaries bench)

CS="${COMPUTE_SANITIZER:-$(command -v compute-sanitizer 2>/dev/null || echo /usr/local/cuda/bin/compute-sanitizer)}"
read -r -a TOOLS <<<"$SANITIZERS"
if ((${#TOOLS[@]})) && [[ ! -x "$CS" ]]; then
  CS_MISSING=1
else
  CS_MISSING=0
fi

# --- machine information -------------------------------------------------------------------------
{
  echo "date:     $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  # shellcheck disable=SC1091
  echo "host:     $(uname -n) ($(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), kernel $(uname -r))"
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu:      $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | paste -sd ';')"
  else
    echo "gpu:      nvidia-smi not found"
  fi
  if [[ -x "$CS" ]]; then
    echo "sanitizer: $CS ($("$CS" --version 2>&1 | grep -Eo 'Version [^ ]+' | head -n 1))"
  else
    echo "sanitizer: compute-sanitizer not found"
  fi
  [[ -f "$BUNDLE/MANIFEST" ]] && sed -n 's/^\(built\|source\|cuda\):/bundle \1:/p' "$BUNDLE/MANIFEST"
} > "$LOGS/machine.txt" 2>&1
cat "$LOGS/machine.txt"

# --- helpers -------------------------------------------------------------------------------------
now() { date +%s; }

# Seconds a step may take: min(its own limit, what the budget leaves after `reserve`); 0 = no time.
step_limit() {  # limit reserve
  local limit="$1" reserve="${2:-0}" left
  if [[ "$BUDGET" == 0 ]]; then echo "$limit"; return; fi
  left=$((START + BUDGET - $(now) - reserve))
  if ((left < 15)); then echo 0; elif ((left < limit)); then echo "$left"; else echo "$limit"; fi
}

# Tidies a log: progress lines redrawn with carriage returns become lines of their own, and a long
# log keeps only 64 KiB of its beginning and 64 KiB of its end.
shorten() {
  local f="$1" size
  [[ -f "$f" ]] || return 0
  if grep -q $'\r' "$f"; then
    tr '\r' '\n' <"$f" | grep -v '^[[:space:]]*$' >"$f.lines"
    mv "$f.lines" "$f"
  fi
  size="$(wc -c <"$f" 2>/dev/null || echo 0)"
  ((size > 160 * 1024)) || return 0
  { head -c 65536 "$f"; printf '\n\n[... %d bytes cut by run.sh ...]\n\n' $((size - 131072)); tail -c 65536 "$f"; } >"$f.short"
  mv "$f.short" "$f"
}

# Counts a Boost.Test JUnit file: "passed failed skipped name-of-failed-case, ...".
# A case with <failure> or <error> failed, one with <skipped/> was skipped (disabled, or a
# precondition said no); text inside CDATA sections is ignored. Prints "0 0 0" for no file.
junit_counts() {
  [[ -s "$1" ]] || { echo "0 0 0"; return; }
  awk '
    function flush() {
      if (!open) return
      if (failed) { nf++; if (nf <= 5) names = names (names != "" ? ", " : "") current }
      else if (skipped) ns++
      else np++
      open = 0
    }
    function attr(tag, key,   re) {
      re = "[ \t]" key "=\"[^\"]*\""
      if (match(tag, re)) return substr(tag, RSTART + length(key) + 3, RLENGTH - length(key) - 4)
      return ""
    }
    {
      line = $0
      while (line != "") {
        if (incdata) { p = index(line, "]]>"); if (!p) break; line = substr(line, p + 3); incdata = 0; continue }
        p = index(line, "<"); if (!p) break
        line = substr(line, p)
        if (substr(line, 1, 9) == "<![CDATA[") { incdata = 1; line = substr(line, 10); continue }
        if (substr(line, 1, 10) == "<testcase " || substr(line, 1, 10) == "<testcase>") {
          flush(); open = 1; failed = 0; skipped = 0
          e = index(line, ">"); tag = e ? substr(line, 1, e) : line
          cls = attr(tag, "classname"); gsub(/\./, "/", cls)
          current = (cls != "" ? cls "/" : "") attr(tag, "name")
        } else if (substr(line, 1, 8) == "<failure" || substr(line, 1, 6) == "<error") {
          failed = 1
        } else if (substr(line, 1, 8) == "<skipped") {
          skipped = 1
        } else if (substr(line, 1, 11) == "</testcase>") {
          flush()
        }
        line = substr(line, 2)
      }
    }
    END { flush(); printf "%d %d %d %s\n", np, nf, ns, names }
  ' "$1"
}

# Results, by binary name.
declare -A T_PASS T_FAIL T_SKIP T_STATUS T_SECS T_NAMES SAN B_STATUS B_LAST B_SECS
NOT_RUN=0
INTERRUPTED=0
CURRENT=""   # what runs now: test:NAME, TOOL:NAME or bench:NAME

# Runs a command with a time limit (timeout gives it its own process group and kills all of it).
# In the background, so that a TERM/INT to run.sh is handled at once (bash runs traps only between
# foreground commands, but interrupts `wait`); on_signal passes the signal on to CHILD.
CHILD=""
limited() {  # seconds log command...
  local secs="$1" log="$2" rc
  shift 2
  TEST_TMPDIR="$WORK/tmp" TMPDIR="$WORK/tmp" BOOST_TEST_COLOR_OUTPUT=no \
    timeout --kill-after=15 "$secs" "$@" >"$log" 2>&1 </dev/null &
  CHILD=$!
  wait "$CHILD"
  rc=$?
  CHILD=""
  return "$rc"
}

run_test() {
  local name="$1" secs rc t0 counts p f s names status
  local xml="$LOGS/tests/$name.xml" log="$LOGS/tests/$name.log"
  secs="$(step_limit "$TEST_TIMEOUT" 0)"
  if ((secs == 0)); then
    T_STATUS[$name]="NOT RUN (time)"; T_PASS[$name]=0; T_FAIL[$name]=0; T_SKIP[$name]=0; T_SECS[$name]=0
    NOT_RUN=1
    return
  fi
  printf '[test] %s ... ' "$name"
  CURRENT="test:$name"
  t0="$(now)"
  local -a extra_env=() extra_args=()
  eval "extra_env=(${TEST_ENV[$name]:-})"
  eval "extra_args=(${TEST_ARGS[$name]:-})"
  FERRY_BACKEND=cuda BOOST_TEST_LOGGER="HRF,test_suite,stdout:JUNIT,message,$xml" \
    limited "$secs" "$log" env "${extra_env[@]}" "$BUNDLE/tests/$name" "${extra_args[@]}"
  rc=$?
  T_SECS[$name]=$(($(now) - t0))
  shorten "$log"
  counts="$(junit_counts "$xml")"
  read -r p f s names <<<"$counts"
  if ((rc == 124 || rc == 137)); then
    status="TIMEOUT (${secs}s)"; ((f++))
  elif ((p + f + s == 0 && rc != 0)); then
    status="CRASH (exit $rc, no JUnit)"; f=1
  elif ((rc != 0 && f == 0)); then
    status="FAIL (exit $rc outside cases)"; f=1
  elif ((rc != 0)); then
    status="FAIL"
  else
    status="ok"
  fi
  T_PASS[$name]=$p; T_FAIL[$name]=$f; T_SKIP[$name]=$s; T_STATUS[$name]="$status"; T_NAMES[$name]="$names"
  printf '%s: %d passed, %d failed, %d skipped (%ss)\n' "$status" "$p" "$f" "$s" "${T_SECS[$name]}"
}

run_sanitizer() {
  local tool="$1" name="$2" secs rc errors result reserve=0
  local log="$LOGS/sanitizer/$tool-$name.log"
  ((${#BENCHES[@]})) && reserve="$BENCH_RESERVE"
  secs="$(step_limit "$SAN_TIMEOUT" "$reserve")"
  if ((secs == 0)); then
    SAN[$tool:$name]="not run"; NOT_RUN=1
    return
  fi
  # --require-cuda-init no: a binary whose cases make no CUDA call is not an error.
  # --report-api-errors no (unless RUN_SANITIZER_API_ERRORS says otherwise): a driver call that
  # returns an error is not a sanitizer error. ferry checks every status, and its tests provoke
  # such errors on purpose (invalid pointers, double frees, out of memory, probing a pointer's
  # attributes); memory errors in kernels, leaks and synchronization hazards are still reported.
  local args=(--tool "$tool" --error-exitcode 99 --print-limit 20 --require-cuda-init no
              --report-api-errors "$API_ERRORS")
  [[ "$tool" == memcheck ]] && args+=(--leak-check full)
  printf '[%s] %s ... ' "$tool" "$name"
  CURRENT="$tool:$name"
  local -a extra_env=() extra_args=()
  eval "extra_env=(${TEST_ENV[$name]:-})"
  eval "extra_args=(${TEST_ARGS[$name]:-})"
  FERRY_BACKEND=cuda BOOST_TEST_LOGGER="HRF,error,stdout:JUNIT,error,$LOGS/sanitizer/$tool-$name.xml" \
    limited "$secs" "$log" env "${extra_env[@]}" "$CS" "${args[@]}" "$BUNDLE/tests/$name" "${extra_args[@]}"
  rc=$?
  shorten "$log"
  # memcheck, synccheck, initcheck: "ERROR SUMMARY: N errors";
  # racecheck: "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)";
  # a binary that made no CUDA call: "Target application terminated before first instrumented
  # API call", and then compute-sanitizer exits 0 whatever the binary's status: its JUnit says.
  errors="$(grep -Eo 'ERROR SUMMARY: [0-9]+ error' "$log" | tail -n 1 | grep -Eo '[0-9]+')"
  if [[ -z "$errors" ]]; then
    errors="$(grep -Eo 'RACECHECK SUMMARY: [0-9]+ hazards? displayed \([0-9]+ error' "$log" | tail -n 1 |
              sed -E 's/.*\(([0-9]+) error/\1/')"
  fi
  if [[ -z "$errors" ]] && grep -q 'terminated before first instrumented API call' "$log"; then
    errors=0
  fi
  local xml="$LOGS/sanitizer/$tool-$name.xml" case_failures=0
  [[ -s "$xml" ]] && case_failures="$(junit_counts "$xml" | cut -d' ' -f2)"
  # "0" is the only good result; "N errors", "0 fail=N" (N cases failed under the tool),
  # "0 exit=N" (the binary failed outside its cases), "? exit=N" (no summary: crashed),
  # "TIMEOUT" and "not run" are not.
  if ((rc == 124 || rc == 137)); then
    result="TIMEOUT"
  elif [[ -z "$errors" ]]; then
    result="? exit=$rc"
  elif ((errors > 0)); then
    result="$errors errors"
  elif ((case_failures > 0)); then
    result="0 fail=$case_failures"
  elif ((rc != 0)); then
    result="0 exit=$rc"
  else
    result="0"
  fi
  SAN[$tool:$name]="$result"
  echo "$result"
}

run_bench() {
  local name="$1" secs rc t0 log="$LOGS/bench/$1.log"
  secs="$(step_limit "$BENCH_TIMEOUT" 0)"
  if ((secs == 0)); then
    B_STATUS[$name]="NOT RUN (time)"; B_LAST[$name]=""; B_SECS[$name]=0; NOT_RUN=1
    return
  fi
  # --out goes to the benchmarks that write a report (their --help lists it); the others refuse it.
  local arguments=()
  if "$BUNDLE/bench/$name" --help 2>/dev/null | grep -q -- '--out '; then arguments=(--out "$OUTDIR/bench"); fi
  echo "[bench] $name ${arguments[*]}"
  CURRENT="bench:$name"
  t0="$(now)"
  FERRY_BACKEND=cuda limited "$secs" "$log" "$BUNDLE/bench/$name" "${arguments[@]}"
  rc=$?
  B_SECS[$name]=$(($(now) - t0))
  shorten "$log"
  tail -n 40 "$log" | sed 's/^/    /'
  if ((rc == 124 || rc == 137)); then B_STATUS[$name]="TIMEOUT (${secs}s)"
  elif ((rc != 0)); then B_STATUS[$name]="FAIL (exit $rc)"
  else B_STATUS[$name]="ok"; fi
  B_LAST[$name]="$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-110)"
}

# --- summary -------------------------------------------------------------------------------------
OVERALL_OK=1
table() {
  local name tool width=12 p=0 f=0 s=0 san_errors=0 bench_failed=0 v
  for name in "${TESTS[@]}" "${BENCHES[@]}"; do ((${#name} > width)) && width=${#name}; done
  OVERALL_OK=1
  echo "ferry GPU run: $(sed -n 's/^gpu: *//p' "$LOGS/machine.txt"); $(date -u '+%Y-%m-%d %H:%M UTC'), $(($(now) - START))s"
  printf "%-${width}s %5s %5s %5s %6s  %-22s" "TEST BINARY" PASS FAIL SKIP TIME STATUS
  for tool in "${TOOLS[@]}"; do printf ' %-11s' "${tool^^}"; done
  echo
  for name in "${TESTS[@]}"; do
    if [[ -z "${T_STATUS[$name]:-}" ]]; then
      printf "%-${width}s %5s %5s %5s %6s  %-22s" "$name" - - - - "pending"
    else
      printf "%-${width}s %5d %5d %5d %5ss  %-22s" "$name" "${T_PASS[$name]}" "${T_FAIL[$name]}" "${T_SKIP[$name]}" \
        "${T_SECS[$name]}" "${T_STATUS[$name]}"
      ((p += T_PASS[$name], f += T_FAIL[$name], s += T_SKIP[$name]))
      [[ "${T_STATUS[$name]}" == ok ]] || OVERALL_OK=0
    fi
    for tool in "${TOOLS[@]}"; do
      v="${SAN[$tool:$name]:-pending}"
      ((CS_MISSING)) && v="no sanitizer"
      printf ' %-11s' "$v"
      [[ "$v" == 0 ]] || { OVERALL_OK=0; [[ "$v" =~ ^([0-9]+)\ errors ]] && ((san_errors += BASH_REMATCH[1])); }
    done
    echo
  done
  ((${#TESTS[@]})) || echo "(no test binaries)"
  printf "%-${width}s %5d %5d %5d\n" "TOTAL" "$p" "$f" "$s"
  echo
  if ((${#BENCHES[@]})); then
    printf "%-${width}s %6s  %-16s %s\n" "BENCHMARK" TIME STATUS "LAST LINE"
    for name in "${BENCHES[@]}"; do
      printf "%-${width}s %6s  %-16s %s\n" "$name" "${B_SECS[$name]:+${B_SECS[$name]}s}" "${B_STATUS[$name]:-pending}" \
        "${B_LAST[$name]:-}"
      [[ "${B_STATUS[$name]:-}" == ok ]] || { OVERALL_OK=0; ((bench_failed++)); }
    done
  else
    echo "(no benchmark binaries)"
  fi
  ((${#TESTS[@]} + ${#BENCHES[@]})) || OVERALL_OK=0
  ((NOT_RUN)) && OVERALL_OK=0
  echo
  local verdict="PASS"
  ((OVERALL_OK)) || verdict="FAIL"
  ((INTERRUPTED)) && verdict="INTERRUPTED"
  echo "RESULT: $verdict: $p passed, $f failed, $s skipped test cases; $san_errors sanitizer errors" \
       "(${TOOLS[*]:-no sanitizers}); $bench_failed of ${#BENCHES[@]} benchmarks not ok$( ((NOT_RUN)) && echo '; some steps not run for lack of time')"
}

details() {
  local name tool v log
  echo "--- details (full logs in logs.tar.gz) ---"
  for name in "${TESTS[@]}"; do
    [[ -n "${T_STATUS[$name]:-}" && "${T_STATUS[$name]}" != ok ]] || continue
    echo "* tests/$name: ${T_STATUS[$name]}${T_NAMES[$name]:+; failed: ${T_NAMES[$name]}}"
    log="$LOGS/tests/$name.log"
    { grep -E 'error|fatal|failure|exception' "$log" | head -n 12; tail -n 3 "$log"; } 2>/dev/null | sed 's/^/    /' | cut -c1-200
  done
  for tool in "${TOOLS[@]}"; do
    for name in "${TESTS[@]}"; do
      v="${SAN[$tool:$name]:-}"
      [[ -n "$v" && "$v" != 0 ]] || continue
      echo "* $tool $name: $v"
      log="$LOGS/sanitizer/$tool-$name.log"
      {
        grep -E '^========= ' "$log" | grep -v 'COMPUTE-SANITIZER$' | head -n 12
        grep -vE '^========= ' "$log" | grep -E 'error|fatal|failure|exception' | head -n 5
      } 2>/dev/null | sed 's/^/    /' | cut -c1-200
    done
  done
  for name in "${BENCHES[@]}"; do
    [[ -n "${B_STATUS[$name]:-}" && "${B_STATUS[$name]}" != ok ]] || continue
    echo "* bench/$name: ${B_STATUS[$name]}"
    tail -n 12 "$LOGS/bench/$name.log" 2>/dev/null | sed 's/^/    /' | cut -c1-200
  done
  if ((${#BENCHES[@]})); then
    echo "--- benchmark output (last lines) ---"
    for name in "${BENCHES[@]}"; do
      [[ -f "$LOGS/bench/$name.log" ]] || continue
      echo "* bench/$name:"
      tail -n 25 "$LOGS/bench/$name.log" | sed 's/^/    /' | cut -c1-200
    done
  fi
}

# Rewrites OUTDIR/summary.txt and OUTDIR/logs.tar.gz from what has run so far.
save() {
  { table; echo; cat "$LOGS/machine.txt"; echo; details; } >"$OUTDIR/summary.txt.new" 2>&1
  mv "$OUTDIR/summary.txt.new" "$OUTDIR/summary.txt"
  cp "$OUTDIR/summary.txt" "$LOGS/summary.txt"
  tar -czf "$OUTDIR/logs.tar.gz.new" -C "$WORK" logs 2>/dev/null && mv "$OUTDIR/logs.tar.gz.new" "$OUTDIR/logs.tar.gz"
}

# shellcheck disable=SC2317  # called by the trap
on_signal() {
  INTERRUPTED=1
  echo "run.sh: interrupted; saving what ran so far" >&2
  if [[ -n "$CHILD" ]]; then
    kill -TERM "$CHILD" 2>/dev/null
    wait "$CHILD" 2>/dev/null
  fi
  local kind="${CURRENT%%:*}" name="${CURRENT##*:}"
  case "$kind" in
    test)  T_STATUS[$name]="INTERRUPTED"; T_PASS[$name]=0; T_FAIL[$name]=1; T_SKIP[$name]=0; T_SECS[$name]=0 ;;
    bench) B_STATUS[$name]="INTERRUPTED" ;;
    "") ;;
    *)     SAN[$kind:$name]="INTERRUPTED" ;;
  esac
  save
  details
  echo
  table
  exit 130
}
trap on_signal INT TERM

# --- run -----------------------------------------------------------------------------------------
echo "bundle: $BUNDLE (${#TESTS[@]} tests, ${#BENCHES[@]} benchmarks); out: $OUTDIR; budget: ${BUDGET}s;" \
     "sanitizers: ${TOOLS[*]:-none} (--report-api-errors $API_ERRORS)"
if ((CS_MISSING)); then
  echo "run.sh: compute-sanitizer not found ($CS): sanitizer runs are left out (and count as failures)" >&2
fi
save

for name in "${TESTS[@]}"; do run_test "$name"; save; done
if ((!CS_MISSING)); then
  for tool in "${TOOLS[@]}"; do
    for name in "${TESTS[@]}"; do run_sanitizer "$tool" "$name"; save; done
  done
fi
for name in "${BENCHES[@]}"; do run_bench "$name"; save; done

save
if [[ "${RUN_KEEP_LOGS:-0}" == 1 ]]; then
  rm -rf "$OUTDIR/logs" && cp -r "$LOGS" "$OUTDIR/logs"
fi
echo
details
echo
table
rm -rf "$WORK"
((OVERALL_OK)) && exit 0
exit 1
