// The GPU memory NCCL holds in each process over its run, from its communicators' figures (made,
// each set-up call after, released): the total at each change, its peak and when, and what the
// communicators never released still held at the end.
#pragma once

#include "model/job_model.h"

#include <cstdint>
#include <vector>

namespace ncclwatch::model {

struct ProcessMemory {
  const ProcessTrace* process = nullptr;
  int32_t rank = -1;                 // its world rank (lifecycle_findings.h world_rank)
  uint64_t peak_bytes = 0;           // the most its communicators held at once
  int64_t peak_ns = 0;               // when (CLOCK_MONOTONIC of the process)
  uint64_t held_at_end_bytes = 0;    // by communicators alive at its end
  uint32_t unreleased_comms = 0;     // ... how many
  uint32_t measured_comms = 0;       // communicators with a figure
};

// One entry per process with a figure for any communicator (gpu timing mode), in the job's order.
std::vector<ProcessMemory> nccl_memory_by_process(const Job& job);

// The entry of the largest peak, or nullptr.
const ProcessMemory* largest_peak(const std::vector<ProcessMemory>& memory);

}  // namespace ncclwatch::model
