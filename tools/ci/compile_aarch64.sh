#!/usr/bin/env bash
# Compiles every product source of ferry for aarch64 (Grace Hopper hosts are Arm) with Debian 12's
# cross compiler (g++-aarch64-linux-gnu, which `tools/ferry setup` installs), so that x86-only code
# (intrinsics, builtins, inline assembly, type-size assumptions) is caught on an x86 CI machine.
# A compile check only (-c -o /dev/null): no object kept, no link, nothing runs. It covers the .cc
# files under api/, engine/, sim/ (the sim backend: users' tests link it, on Arm hosts too) and
# examples/pipeline_server/; every header they include is checked through them. Not checked: the CUDA kernels (nvcc's, not the host's) and
# the sources Bazel generates (kernels' fatbin_data.cc, a byte array written by embed_fatbin.sh).
# The flags are those of the Bazel build (-c opt): its toolchain's warning and optimization flags,
# then FERRY_COPTS (read from tools/bazel/ferry.bzl, -Werror included), with its include paths: the
# repo root, api/ (as a system include, like Bazel's `includes`), the CUDA toolkit's headers, Boost's
# and UCX's (engine/remote: the headers `tools/ferry setup` unpacks into .ucx/ cover every architecture
# UCX builds for, aarch64 included). -O2 rather than -fsyntax-only, at about twice the cost: GCC's warnings from inlining
# (-Wmismatched-new-delete, -Wstringop-*, -Warray-bounds) differ between x86-64 and aarch64, and with
# -Werror each of them breaks the build on an Arm host.
# Ends with one line:
#   aarch64 compile check: <N> files compiled, <M> failed in <seconds> s
# and exits non-zero, after the compiler's output for each failed file, if any failed.
# Environment: CUDA_PATH (toolkit root, default /usr/local/cuda), FERRY_AARCH64_CXX (the compiler,
# default aarch64-linux-gnu-g++).
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."

cxx="${FERRY_AARCH64_CXX:-aarch64-linux-gnu-g++}"
cuda_include="${CUDA_PATH:-/usr/local/cuda}/include"
command -v "$cxx" >/dev/null 2>&1 ||
  { echo "compile_aarch64: $cxx not found (tools/ferry setup installs g++-aarch64-linux-gnu)" >&2; exit 1; }
[[ -f "$cuda_include/cuda.h" ]] || { echo "compile_aarch64: no $cuda_include/cuda.h (set CUDA_PATH)" >&2; exit 1; }
[[ -d /usr/include/boost ]] || { echo "compile_aarch64: no /usr/include/boost (libboost1.81-dev)" >&2; exit 1; }
ucx_include=.ucx/libucx/include
[[ -f "$ucx_include/ucp/api/ucp.h" ]] ||
  { echo "compile_aarch64: no $ucx_include/ucp/api/ucp.h (tools/ferry setup fetches UCX)" >&2; exit 1; }

# One list of warning flags for both architectures: the one the Bazel build uses.
mapfile -t copts < <(sed -n '/^FERRY_COPTS = \[/,/^\]/p' tools/bazel/ferry.bzl | grep -o '"[^"]*"' | tr -d '"')
[[ " ${copts[*]} " == *" -std=c++20 "* ]] ||
  { echo "compile_aarch64: cannot read FERRY_COPTS from tools/bazel/ferry.bzl" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/ferry-aarch64.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# Boost is header-only here and the same for every architecture, but it lives in the host's
# /usr/include next to x86 glibc headers, which must not stand in for aarch64 ones: the compiler sees
# a folder holding only a link to Boost. Debian's cross g++ also searches /usr/include itself, last;
# an empty --sysroot turns that into a folder that does not exist (its own aarch64 headers stay).
mkdir "$work/include" "$work/sysroot" "$work/logs"
ln -s /usr/include/boost "$work/include/boost"

# Bazel's local_config_cc: compile_flags, then opt_compile_flags (less -g0 and the sections).
toolchain=(-U_FORTIFY_SOURCE -fstack-protector -Wall -Wunused-but-set-parameter -Wno-free-nonheap-object
           -fno-omit-frame-pointer -O2 -D_FORTIFY_SOURCE=1 -DNDEBUG)
flags=("${toolchain[@]}" "${copts[@]}" -c -o /dev/null --sysroot="$work/sysroot"
       -iquote . -isystem api -isystem "$cuda_include" -isystem "$ucx_include" -isystem "$work/include")
mapfile -t sources < <(find api engine sim examples/pipeline_server -name '*.cc' -type f | LC_ALL=C sort)
((${#sources[@]})) || { echo "compile_aarch64: no sources found" >&2; exit 1; }
# Largest first, so that no long compile starts last while the other cores sit idle.
mapfile -t by_size < <(find "${sources[@]}" -printf '%s %p\n' | sort -rn | cut -d' ' -f2-)

started=$SECONDS
# One compiler per core. Each file's output goes to its own log, kept (as NAME.failed) only on failure.
export FERRY_AARCH64_FLAGS
FERRY_AARCH64_FLAGS="$(printf '%s\n' "${flags[@]}")"
# shellcheck disable=SC2016  # the inner bash expands them
printf '%s\0' "${by_size[@]}" |
  xargs -0 -n 1 -P "$(nproc)" bash -c '
    mapfile -t flags <<<"$FERRY_AARCH64_FLAGS"
    log="$2/${3//\//__}"
    if "$1" "${flags[@]}" "$3" >"$log" 2>&1; then rm -f "$log"; else mv "$log" "$log.failed"; fi
  ' _ "$cxx" "$work/logs"

failed=0
for src in "${sources[@]}"; do
  log="$work/logs/${src//\//__}.failed"
  [[ -f "$log" ]] || continue
  failed=$((failed + 1))
  echo "---- $src: $cxx failed:"
  cat "$log"
done
echo "aarch64 compile check: ${#sources[@]} files compiled, $failed failed in $((SECONDS - started)) s"
((failed == 0))
