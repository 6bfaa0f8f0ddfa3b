# Shared setup for the GPU tests: where the build is, where the real NCCL lives, and a result
# counter. Sourced by the tests in this folder; skipped cleanly without a GPU.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="${NCCLWATCH_BUILD:-$ROOT/build}"
SHIM="$BUILD/shim/libncclwatch.so"
REPORT="$BUILD/analyzers/ncclwatch-report"
RESULTS="${GPU_RESULTS:-$(mktemp -d)}"
mkdir -p "$RESULTS"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# The report tool, with the libraries stage.sh put beside it when the machine lacks them.
report() { LD_LIBRARY_PATH="$BUILD/analyzers/lib:${LD_LIBRARY_PATH:-}" "$REPORT" "$@"; }

gpu_count() { nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true; }

# The folder of the real libnccl.so.2: PyTorch's wheel first, then the system.
real_nccl_dir() {
  python3 - <<'PY' 2>/dev/null && return
import importlib.util, os
spec = importlib.util.find_spec("nvidia.nccl")
for p in (spec.submodule_search_locations or []) if spec else []:
    lib = os.path.join(p, "lib")
    if os.path.exists(os.path.join(lib, "libnccl.so.2")):
        print(lib); raise SystemExit(0)
raise SystemExit(1)
PY
  ldconfig -p | awk '/libnccl.so.2 /{print $NF; exit}' | xargs -r dirname
}

# The folder of the real CUDA driver (libcuda.so.1).
real_cuda_dir() { ldconfig -p | awk '/libcuda.so.1 /{print $NF; exit}' | xargs -r dirname; }

passed=0
failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
expect() {  # expect DESCRIPTION COMMAND...
  local what="$1"; shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; }

# Builds a GPU test program of this folder against the real NCCL: build_gpu_program SOURCE OUTPUT.
# Status 2 without nvcc or NCCL's headers (skip), the compiler's when it fails.
build_gpu_program() {
  local nccl_lib nccl_inc compiler
  nccl_lib="$(real_nccl_dir)"
  nccl_inc="$(dirname "$nccl_lib")/include"
  compiler="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  [ -x "$compiler" ] && [ -f "$nccl_inc/nccl.h" ] || { echo "no nvcc or no NCCL headers"; return 2; }
  "$compiler" -O2 -std=c++17 -I"$nccl_inc" -I"$ROOT/tests/gpu" -o "$2" "$1" -L"$nccl_lib" -l:libnccl.so.2 \
    -Xlinker -rpath="$nccl_lib"
}
