#!/usr/bin/env bash
# DeepEP's own intranode test under the shim: the seed's case. Builds DeepEP v1.2.1 (the last
# release on NVSHMEM, for sm_90) from a source archive brought along (GPU machines often have no
# package registry): .deepep/DeepEP-v1.2.1.tar.gz, made where the source is with
#     git -C DeepEP archive --format=tar.gz --prefix=DeepEP/ v1.2.1 > .deepep/DeepEP-v1.2.1.tar.gz
# or DEEPEP_ARCHIVE=path. Needs nvcc, PyTorch and (for its internode kernels, built when present)
# the nvidia-nvshmem wheel. Then its low-latency test on one rank (NVSHMEM, one GPU) as shipped
# and as the seed left it, and, on 2 GPUs (its intranode kernels take 2, 4 or 8 ranks):
#   - as shipped (buffer.destroy(), dist.destroy_process_group() at the end): no alert, no leak;
#   - without those two lines (the seed's situation): every rank's alert and `leaks` name each
#     communicator with the Python line that made it and PyTorch's remedy.
source "$(dirname "$0")/common.sh"
archive="${DEEPEP_ARCHIVE:-$ROOT/.deepep/DeepEP-v1.2.1.tar.gz}"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
[ -f "$archive" ] || { echo "SKIP: no DeepEP source archive ($archive)"; exit 0; }
command -v nvcc >/dev/null || { echo "SKIP: no nvcc"; exit 0; }
python3 -c 'import torch' 2>/dev/null || { echo "SKIP: no PyTorch"; exit 0; }

dir="$RESULTS/deepep"; rm -rf "$dir"; mkdir -p "$dir"
tar xzf "$archive" -C "$dir"
src="$dir/DeepEP"
# The build: its extension next to its package (build_ext --inplace), for sm_90 as DeepEP's
# setup.py defaults to; ninja's jobs from the cores here.
# CUDA 13 keeps libcu++ (cuda/std/...) under include/cccl, where nvcc looks but the host compiler
# does not; NVSHMEM's headers include it from DeepEP's C++ file.
cccl="$(dirname "$(command -v nvcc)")/../include/cccl"
[ -d "$cccl" ] && export CPATH="$cccl${CPATH:+:$CPATH}"
start=$(date +%s)
(cd "$src" && MAX_JOBS="$(nproc)" TORCH_CUDA_ARCH_LIST=9.0 python3 setup.py build_ext --inplace) >"$dir/build.log" 2>&1
build_rc=$?
echo "DeepEP build: exit $build_rc in $(( $(date +%s) - start )) s ($(grep -c 'nvcc' "$dir/build.log") nvcc lines)"
grep -E "^ > (Sources|NVSHMEM path|Arch list)" "$dir/build.log"
expect "DeepEP v1.2.1 builds for sm_90 and imports" \
  env PYTHONPATH="$src" python3 -c 'import deep_ep; assert deep_ep.Buffer.is_sm90_compiled(); print("deep_ep imported from", deep_ep.__file__)'
[ "$build_rc" -eq 0 ] || tail -30 "$dir/build.log"

# A test of DeepEP without its teardown lines (buffer.destroy(), dist.destroy_process_group()):
# the seed's situation. seed_of TEST prints the new file's name.
seed_of() {
  local seed="$src/tests/${1%.py}_seed.py"
  sed -e '/^    buffer\.destroy()$/d' -e '/^    dist\.destroy_process_group()$/d' "$src/tests/$1" >"$seed"
  echo "$(( $(wc -l <"$src/tests/$1") - $(wc -l <"$seed") ))" >"$seed.removed"
  basename "$seed"
}
run_deepep() {  # run_deepep NAME TEST ARGS...: traces in $dir/NAME, its leaks report beside them
  local name="$1" test_file="$2"; shift 2
  (cd "$src/tests" && NCCLWATCH_DIR="$dir/$name" LD_PRELOAD="$SHIM" PYTHONPATH="$src" timeout 600 \
    python3 "$test_file" "$@") >"$dir/$name.out" 2>"$dir/$name.err"
  echo $? >"$dir/$name.rc"
  echo "$name: exit $(cat "$dir/$name.rc")"
  report leaks --json "$dir/$name" >"$dir/$name.leaks.json"
  report leaks "$dir/$name" >"$dir/$name.leaks.txt"
}

# DeepEP's low-latency test on one rank (NVSHMEM with one PE: it runs on one GPU), as shipped and
# as the seed left it: PyTorch's group and whatever NVSHMEM made through NCCL.
run_deepep ll-shipped test_low_latency.py --num-processes 1
run_deepep ll-seed "$(seed_of test_low_latency.py)" --num-processes 1
echo "---- low latency, seed: the alert and the leaks report"
grep -A8 'never destroyed' "$dir/ll-seed.err" | head -24
head -24 "$dir/ll-seed.leaks.txt"
expect "low latency as shipped: the test passes, no alert, no leak" python3 - "$dir" ll-shipped <<'PY'
import json, sys
d, name = sys.argv[1], sys.argv[2]
leaks = json.load(open(f"{d}/{name}.leaks.json"))
print("communicators traced:", len(leaks["communicators"]), "made by NVSHMEM:",
      sum(c["made_by_nvshmem"] for c in leaks["communicators"]), "leaked:", len(leaks["leaks"]))
assert open(f"{d}/{name}.rc").read().strip() == "0", "the test itself failed"
assert "never destroyed" not in open(f"{d}/{name}.err").read() and leaks["communicators"] and leaks["leaks"] == []
PY
expect "low latency, seed: each communicator named with its Python line and the remedy for who made it" \
  python3 - "$dir" ll-seed <<'PY'
import json, sys
d, name = sys.argv[1], sys.argv[2]
leaks = json.load(open(f"{d}/{name}.leaks.json"))
comms = [l for l in leaks["leaks"] if l["kind"] == "communicator"]
for c in comms:
    print(c["comm"], c["rank"], c["state"], "NVSHMEM" if c["made_by_nvshmem"] else "", c["created_at"])
print("remedies:", leaks["remedies"])
assert comms and all(c["python_site"] and c["python_site"][0]["file"].endswith(".py") for c in comms)
assert any("destroy_process_group" in r for r in leaks["remedies"])
assert any("NVSHMEM" in r for r in leaks["remedies"]) == any(c["made_by_nvshmem"] for c in comms)
assert "never destroyed" in open(f"{d}/{name}.err").read()
PY

if [ "$(gpu_count)" -lt 2 ]; then
  echo "SKIP: DeepEP's intranode test needs 2 GPUs (its kernels take 2, 4 or 8 ranks)"
  finish; exit
fi

seed="$(seed_of test_intranode.py)"
expect "the seed's test differs from the shipped one by the 2 teardown lines" test "$(cat "$src/tests/$seed.removed")" -eq 2
run_deepep shipped test_intranode.py --num-processes 2
run_deepep seed "$seed" --num-processes 2
echo "---- seed: the alerts and the leaks report"
grep -A6 'never destroyed' "$dir/seed.err" | head -30
head -20 "$dir/seed.leaks.txt"
grep -h 'NCCL WARN' "$dir"/*.err | head -5

expect "as shipped: the test passes, no alert, no leak" python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
err = open(f"{d}/shipped.err").read()
leaks = json.load(open(f"{d}/shipped.leaks.json"))
print("communicators traced:", len(leaks["communicators"]), "leaked:", len(leaks["leaks"]))
assert open(f"{d}/shipped.rc").read().strip() == "0", "the test itself failed"
assert "never destroyed" not in err and leaks["communicators"] and leaks["leaks"] == [], leaks["leaks"][:2]
PY
expect "seed: every communicator named with its Python line in DeepEP's test, PyTorch's remedy, in the alert and leaks" \
  python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
err = open(f"{d}/seed.err").read()
leaks = json.load(open(f"{d}/seed.leaks.json"))
comms = [l for l in leaks["leaks"] if l["kind"] == "communicator"]
for c in comms:
    print(c["comm"], c["rank"], c["state"], c["created_at"])
assert comms and all(c["python_site"] and c["python_site"][0]["file"].endswith((".py")) for c in comms), comms
assert any("destroy_process_group" in r for r in leaks["remedies"]), leaks["remedies"]
assert err.count("never destroyed") >= 2, "an alert on each rank"
PY
finish
