#!/usr/bin/env bash
# Copies what the GPU tests need from a build folder into one small folder (default .gpu-stage)
# that can travel to a GPU machine without fmt/abseil/Catch2: the shim, the examples, the
# launcher and the tests themselves. The report tool runs where it was built.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BUILD="${1:-$ROOT/build}"
STAGE="${2:-$ROOT/.gpu-stage}"
rm -rf "$STAGE"
mkdir -p "$STAGE/shim" "$STAGE/examples" "$STAGE/analyzers"
cp "$BUILD/shim/libncclwatch.so" "$STAGE/shim/"
cp "$BUILD/examples/leaky_nccl" "$STAGE/examples/"
cp "$BUILD/analyzers/ncclwatch-report" "$STAGE/analyzers/"
# elfutils is seldom installed on GPU machines: bring the two libraries the report tool needs.
mkdir -p "$STAGE/analyzers/lib"
for lib in libdw.so.1 libelf.so.1; do
  path="$(ldd "$BUILD/analyzers/ncclwatch-report" | awk -v l="$lib" '$1 == l {print $3}')"
  [ -n "$path" ] && cp -L "$path" "$STAGE/analyzers/lib/"
done
echo "staged into $STAGE"
