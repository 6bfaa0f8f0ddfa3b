#!/usr/bin/env bash
# The shim's cost per call in one process (ab_overhead.cc): NCCL's own entry point and the shim's
# wrapper alternate on the same communicators, two processes with one GPU each and one process
# driving two GPUs. Without the shim both ways are NCCL itself: that run shows the noise floor.
# "gpu+metrics" is gpu mode with the live metrics file rewritten every 0.1 s (its floor, here 20x
# faster than a Prometheus setup would): the cost per call must not move.
source "$(dirname "$0")/common.sh"
if [ "$(gpu_count)" -lt 1 ]; then echo "SKIP: needs a GPU"; exit 0; fi
layouts="single"
[ "$(gpu_count)" -ge 2 ] && layouts="ranks group single"
dir="$RESULTS/ab-overhead"; rm -rf "$dir"; mkdir -p "$dir"
build_gpu_program "$ROOT/tests/gpu/ab_overhead.cc" "$dir/ab_overhead"
case $? in 0) ;; 2) echo "SKIP: needs nvcc and NCCL's headers"; exit 0 ;; *) fail "ab_overhead builds"; finish; exit ;; esac
for layout in $layouts; do
  for mode in none gpu gpu+metrics host; do
    out="$dir/$layout-$mode.txt"
    if [ "$mode" = none ]; then
      timeout 300 "$dir/ab_overhead" "$layout" >"$out" 2>&1
    elif [ "$mode" = gpu+metrics ]; then
      LD_PRELOAD="$SHIM" NCCLWATCH_TIMING=gpu NCCLWATCH_DIR="$dir/traces-$layout-metrics" \
        NCCLWATCH_METRICS_FILE="$dir/metrics-$layout-%p.prom" NCCLWATCH_METRICS_SEC=0.1 \
        timeout 300 "$dir/ab_overhead" "$layout" >"$out" 2>&1
    else
      LD_PRELOAD="$SHIM" NCCLWATCH_TIMING="$mode" NCCLWATCH_DIR="$dir/traces-$layout-$mode" \
        timeout 300 "$dir/ab_overhead" "$layout" >"$out" 2>&1
    fi
    echo "== $layout, shim: $mode (exit $?)"; cat "$out"
  done
done
# The wrapper really ran: each traced run recorded its all-reduces (warm-up + 40 rounds per size).
for layout in $layouts; do
  expect "the $layout run in gpu mode recorded its calls through the wrapper" python3 - "$dir/traces-$layout-gpu" <<'PY'
import subprocess, sys, json, os
sys.exit(0 if os.path.isdir(sys.argv[1]) and any(f.endswith(".nwt") for f in os.listdir(sys.argv[1])) else 1)
PY
done
expect "the metrics files were written while the A/B ran" python3 - "$dir" <<'PY'
import glob, sys
files = glob.glob(sys.argv[1] + "/metrics-*.prom")
print("metrics files:", files)
sys.exit(0 if files and all("ncclwatch_ops_issued_total" in open(f).read() for f in files) else 1)
PY
# A guard against regressions (the figures themselves go to the README): under 1 us added per
# 8 B call in gpu mode, where the cost of a driver call per launch would show.
first="${layouts%% *}"
expect "gpu mode adds under 1 us per 8 B call ($first)" python3 - "$dir/$first-gpu.txt" <<'PY'
import re, sys
m = re.search(r"size 8 B: complete .*? added ([+-][0-9.]+) us .*? issue .*? added ([+-][0-9.]+) us", open(sys.argv[1]).read())
print("8 B added (complete, issue):", m and m.groups())
sys.exit(0 if m and float(m.group(2)) < 1.0 else 1)
PY
finish
