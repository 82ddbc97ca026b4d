#!/usr/bin/env bash
# The version stated in ferry/version.hpp is the newest one CHANGELOG.md describes, so that a release's
# notes and its headers (and the CMake and pkg-config files made from them) name the same version.
set -euo pipefail
header="$1" changelog="$2"
number() { sed -n "s/^#define FERRY_VERSION_$1 \([0-9][0-9]*\)\$/\1/p" "$header"; }
version="$(number MAJOR).$(number MINOR).$(number PATCH)"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "FAIL: cannot read the version from $header: '$version'"; exit 1; }
newest="$(sed -n 's/^## \([0-9][0-9.]*\).*/\1/p' "$changelog" | head -n 1)"
if [[ "$newest" != "$version" ]]; then
  echo "FAIL: $header says $version, the newest section of $changelog is '${newest:-none}'"
  exit 1
fi
echo "ok: version $version, described by $changelog"
