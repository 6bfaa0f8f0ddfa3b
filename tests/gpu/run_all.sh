#!/usr/bin/env bash
# Runs every GPU test in this folder; each skips cleanly without GPUs. Ends "N passed, N failed".
# On a machine with a GPU, a script that ran nothing fails, unless what it lacks is more GPUs or a
# program the user builds from its own sources (nccl-tests, DeepEP, NCCL Inspector).
source "$(dirname "$0")/common.sh"
gpus="$(gpu_count)"
total_passed=0; total_failed=0
for t in "$(dirname "$0")"/leaky_example.sh "$(dirname "$0")"/torch_lifecycle.sh "$(dirname "$0")"/torch_mismatch.sh "$(dirname "$0")"/torch_hang.sh "$(dirname "$0")"/latency_vs_nccl_tests.sh "$(dirname "$0")"/torch_numbers.sh "$(dirname "$0")"/torch_sigkill.sh "$(dirname "$0")"/coverage.sh "$(dirname "$0")"/stream_checks.sh "$(dirname "$0")"/ab_overhead.sh "$(dirname "$0")"/metrics_live.sh "$(dirname "$0")"/init_hang.sh "$(dirname "$0")"/torch_ring.sh "$(dirname "$0")"/torch_python_site.sh "$(dirname "$0")"/torch_comm_memory.sh "$(dirname "$0")"/nccl_memory_phases.sh "$(dirname "$0")"/torch_memory_story.sh "$(dirname "$0")"/torch_nvshmem.sh "$(dirname "$0")"/deepep_intranode.sh "$(dirname "$0")"/torch_hostile.sh "$(dirname "$0")"/torch_teardown_hang.sh "$(dirname "$0")"/graph_replays.sh "$(dirname "$0")"/torch_live_verdict.sh "$(dirname "$0")"/torch_frameworks.sh "$(dirname "$0")"/profiler_plans.sh "$(dirname "$0")"/profiler_kernels.sh "$(dirname "$0")"/profiler_advice.sh "$(dirname "$0")"/profiler_inspector.sh "$(dirname "$0")"/profiler_peers.sh; do
  echo "=== $(basename "$t")"
  out="$(GPU_RESULTS="$RESULTS" bash "$t" 2>&1)"; echo "$out"
  line="$(echo "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -1)"
  total_passed=$((total_passed + $(echo "${line:-0 passed}" | awk '{print $1}')))
  total_failed=$((total_failed + $(echo "${line:-x passed, 0 failed}" | awk '{print $3}')))
  if [ "$gpus" -ge 1 ] && [ -z "$line" -o "$(echo "$line" | awk '{print $1 + $3}')" = 0 ] &&
    ! echo "$out" | grep -qE '^SKIP.*(needs (2|two) GPUs|nccl-tests|DeepEP|Inspector)'; then
    echo "FAIL: $(basename "$t") ran nothing on a machine with $gpus GPU(s)"
    total_failed=$((total_failed + 1))
  fi
done
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
