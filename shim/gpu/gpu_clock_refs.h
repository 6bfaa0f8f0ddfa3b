// Mapping GPU event times onto the host clock: per CUDA context, reference events recorded on an
// idle private stream and waited for, so each one's host time is known within half the wait.
#pragma once

#include "gpu/cuda_driver.h"

#include <cstdint>

namespace ncclwatch::gpu {

struct ClockReference {
  CUevent event = nullptr;
  int64_t host_ns = 0;   // CLOCK_MONOTONIC when the event completed
  int64_t error_ns = 0;  // ± uncertainty of host_ns
};

// Takes the first reference of `ctx` if it has none yet (application threads, once per context:
// every launch there then has a reference older than itself).
void ensure_clock_reference(const CudaDriver& cu, CUcontext ctx) noexcept;

// The newest reference of `ctx` taken before `recorded_ns` (so elapsed times are positive and
// short); takes a fresh one first when the newest is over a second old (float milliseconds stay
// precise). False when the launch predates every reference still held.
bool clock_reference_before(const CudaDriver& cu, CUcontext ctx, int64_t recorded_ns, ClockReference& out);

void clock_refs_after_fork_in_child() noexcept;

}  // namespace ncclwatch::gpu
