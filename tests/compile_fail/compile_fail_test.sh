#!/usr/bin/env bash
# Compiles each snippet (it must fail) and checks that the compiler's diagnostic contains the text its
# "// expect-error:" line names. A snippet that compiles, or fails for another reason, fails the test.
# A "// std: c++17" line compiles that snippet in another language version (default c++20).
set -uo pipefail
compiler="${CXX:-g++}"
cuda="${CUDA_PATH:-/usr/local/cuda}"
root="$(pwd)"  # the runfiles root: api/ and the snippets are below it
failures=0
for snippet in "$@"; do
  expected="$(sed -n 's#^// expect-error: ##p' "$snippet")"
  std="$(sed -n 's#^// std: ##p' "$snippet")"
  output="$("$compiler" -std="${std:-c++20}" -fsyntax-only -I"$root/api" -I"$root" -I"$cuda/include" "$snippet" 2>&1)"
  if [[ $? -eq 0 ]]; then
    echo "FAIL $snippet: compiled, but must be rejected"
    failures=$((failures + 1))
  elif ! grep -qF -- "$expected" <<<"$output"; then
    echo "FAIL $snippet: rejected, but not with \"$expected\":"
    echo "$output" | grep -m 3 "error"
    failures=$((failures + 1))
  else
    echo "ok   $snippet: rejected with \"$expected\""
  fi
done
exit $((failures > 0))
