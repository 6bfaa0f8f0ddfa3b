// The GPU memory NCCL holds in each process over its run, from its communicators' figures (made,
// each set-up call after, released): the total at each change, its peak and when, what the
// communicators never released still held at the end, and the idle ones: alive, holding at least
// a setting's bytes, with no op for a setting's stretch until their release or the end.
#pragma once

#include "model/job_model.h"
#include "model/op_model.h"

#include <cstdint>
#include <vector>

namespace ncclwatch::model {

struct IdleSettings {
  double idle_after_s = 60;                  // no op on it for this long ...
  uint64_t min_bytes = uint64_t{256} << 20;  // ... while holding at least this
};

// What to do about an idle communicator, as every report says it.
inline constexpr const char* kIdleRemedy =
    "destroy a communicator once it is done with (ncclCommDestroy; PyTorch: dist.destroy_process_group(group)); on NCCL "
    "2.29.7 and later, ncclCommSuspend releases its memory while it idles and ncclCommResume takes it back";

// One communicator rank with a memory figure.
struct CommMemory {
  const CommInstance* comm = nullptr;
  CommMemoryFigure held;       // CommInstance::held
  int64_t idle_from_ns = 0;    // its last op's start, or its creation (CLOCK_MONOTONIC of the process)
  int64_t idle_until_ns = 0;   // its release, or the end of the trace
  bool released = false;       // idle_until_ns is its release
  bool idle = false;           // the stretch reached idle_after_s while it held min_bytes
  double idle_s() const { return static_cast<double>(wrap_sub(idle_until_ns, idle_from_ns)) / 1e9; }
};

// What a process's communicators held together from one instant on.
struct HeldTotal {
  int64_t time_ns = 0;  // CLOCK_MONOTONIC of the process
  uint64_t bytes = 0;
};

struct ProcessMemory {
  const ProcessTrace* process = nullptr;
  int32_t rank = -1;                 // its world rank (lifecycle_findings.h world_rank)
  uint64_t peak_bytes = 0;           // the most its communicators held at once
  int64_t peak_ns = 0;               // when (CLOCK_MONOTONIC of the process)
  uint64_t held_at_end_bytes = 0;    // by communicators alive at its end
  uint32_t unreleased_comms = 0;     // ... how many
  uint64_t idle_bytes = 0;           // held by its idle communicators
  uint32_t idle_comms = 0;
  std::vector<CommMemory> comms;     // in the order it made them
  std::vector<HeldTotal> total_over_time;  // after each change, one per instant, in time order
  double peak_after_start_s() const;
};

// One entry per process with a figure for any communicator (gpu timing mode), in the job's order.
// `ops` (parallel to job.processes, may be empty) gives each communicator's last op.
std::vector<ProcessMemory> nccl_memory_by_process(const Job& job, const std::vector<ProcessOps>& ops,
                                                  const IdleSettings& idle = {});

// The entry of the largest peak, or nullptr.
const ProcessMemory* largest_peak(const std::vector<ProcessMemory>& memory);

}  // namespace ncclwatch::model
