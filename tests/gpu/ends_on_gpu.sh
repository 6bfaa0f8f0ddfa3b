#!/usr/bin/env bash
# On a GPU machine: the program-ending and signal cases of tests/integration/test_ends.py against
# the real NCCL (PyTorch's) and the real driver, each run with and without the shim by the test
# itself. Cases that are about the CPU stand-in (its driver lacks functions; graph capture of host
# memory) stay in CI.
#   tests/gpu/ends_on_gpu.sh STAGE   (tests/gpu/stage.sh, with tests/integration/{ends_app,seccomp_exec})
set -uo pipefail
build=$(cd "${1:-build}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
nccl_lib=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))')
export NCCLWATCH_BUILD_DIR=$build NCCLWATCH_SHIM=$build/shim/libncclwatch.so NCCLWATCH_REPORT=$build/analyzers/ncclwatch-report
export HOSTNCCL_DIR=$nccl_lib MPRUN_DIR=$root/tests/launcher
# The report tool brings its elfutils (tests/gpu/stage.sh).
export LD_LIBRARY_PATH="$build/analyzers/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# CUDA reserves much address space (an H200 job with PyTorch's NCCL took about 294 GiB before its
# first allocation): the ulimit -v case runs under 512 GiB here.
export NCCLWATCH_TEST_ADDRESS_SPACE_GIB=${NCCLWATCH_TEST_ADDRESS_SPACE_GIB:-512}
failed=0
for case in one_shot_handlers_run_once handler_installed_later_stays_behind_the_guard ignored_bus_error_stays_ignored \
            alternate_stack_is_kept quick_exit_ends_the_trace_as_it_is forked_worker_ending_by_quick_exit \
            exec_ends_the_image_and_its_trace failed_exec_goes_on address_space_limit_leaves_the_application_its_room \
            sandbox_killing_process_vm_readv_costs_nothing; do
  if out=$(python3 "$root/tests/integration/test_ends.py" "$case" 2>&1); then
    echo "PASS $case: $(echo "$out" | tail -2 | head -1)"
  else
    failed=$((failed + 1)); echo "FAIL $case"; echo "$out" | tail -5
  fi
done
echo "ends_on_gpu: $failed failed"
exit $((failed > 0))
