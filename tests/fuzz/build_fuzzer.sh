#!/usr/bin/env bash
# Builds .fuzz-build/argument_fuzzer (libFuzzer, ASan + UBSan) with Debian's clang 14, outside Bazel:
# Bazel's toolchain here is g++, which has no libFuzzer, and switching Bazel's CC would rebuild every
# other target. Each ferry source is compiled once into .fuzz-build/obj (again only when it or a header
# it includes changed, from clang's -MMD files). The fatbin the kernels embed comes from Bazel
# (//kernels:embed_fatbin, nvcc); the sim backend ignores its bytes.
# Usage: tests/fuzz/build_fuzzer.sh   (FERRY_BAZEL: bazel binary; FERRY_FUZZ_CXX: compiler)
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."

BAZEL="${FERRY_BAZEL:-/usr/bin/bazel}"
CXX="${FERRY_FUZZ_CXX:-clang++-14}"
OUT=.fuzz-build
command -v "$CXX" >/dev/null || { echo "build_fuzzer: $CXX not found (tools/ferry setup installs clang-14)" >&2; exit 1; }

"$BAZEL" build --noshow_progress //kernels:embed_fatbin >&2
FATBIN_SOURCE="$("$BAZEL" info bazel-genfiles 2>/dev/null)/kernels/fatbin_data.cc"
[[ -f "$FATBIN_SOURCE" ]] || { echo "build_fuzzer: $FATBIN_SOURCE was not built" >&2; exit 1; }

# The engine and the sim are instrumented for coverage and checked by ASan + UBSan, as the target is.
FLAGS=(-std=c++20 -O1 -g -fno-omit-frame-pointer -include tests/fuzz/source_location_shim.hpp
       -fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link
       -I. -Iapi -isystem "${CUDA_PATH:-/usr/local/cuda}/include"
       -Wall -Wextra -Werror -Wno-error=deprecated-declarations)

mkdir -p "$OUT/obj"
object_of() { printf '%s/obj/%s.o' "$OUT" "$(tr / _ <<<"$1")"; }
needs_build() {  # source object: true when the object is missing or older than an input its .d names
  local object="$2" input
  [[ -f "$object" && -f "$object.d" ]] || return 0
  for input in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$object.d"); do
    [[ "$input" -nt "$object" ]] && return 0
  done
  return 1
}

# engine/remote is ferry::remote (//api:remote, UCX): no part of what the fuzzer drives.
sources=()
for source in engine/*/*.cc; do [[ "$source" == engine/remote/* ]] || sources+=("$source"); done
sources+=(sim/*.cc tests/fuzz/fuzz_world.cc tests/fuzz/argument_fuzzer.cc "$FATBIN_SOURCE")
objects=() pids=() failed=0 built=0
for source in "${sources[@]}"; do
  object="$(object_of "$source")"
  [[ "$source" == "$FATBIN_SOURCE" ]] && object="$(object_of kernels/fatbin_data.cc)"  # not Bazel's long path
  objects+=("$object")
  needs_build "$source" "$object" || continue
  while (($(jobs -rp | wc -l) >= $(nproc))); do wait -n || failed=1; done
  "$CXX" "${FLAGS[@]}" -MMD -MF "$object.d" -c "$source" -o "$object" &
  built=$((built + 1))
done
while (($(jobs -rp | wc -l) > 0)); do wait -n || failed=1; done
((failed == 0)) || { echo "build_fuzzer: compilation failed" >&2; exit 1; }
echo "build_fuzzer: $built of ${#sources[@]} file(s) compiled with $CXX" >&2

"$CXX" -fsanitize=fuzzer,address,undefined "${objects[@]}" -pthread -ldl -o "$OUT/argument_fuzzer"
echo "$OUT/argument_fuzzer"
