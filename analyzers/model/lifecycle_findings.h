// How a job made and released its communicators and resources, beyond what was left at exit:
// communicators that pile up at one call site while the program runs (Megatron's
// destroy_model_parallel dropping its groups without destroying them, cycle after cycle), and
// resources released in the wrong order or registered twice.
#pragma once

#include "model/job_model.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ncclwatch::model {

// A call site (the Python line where Python made the call, else the frame that called NCCL: the
// same call instruction, whoever called it; calls a compiler duplicated, unrolling a loop, count
// apart) that made communicators which piled up: in some process it made them in more than one
// burst, and a later burst was made while an earlier one's were still alive, so that at least
// kPileUpMin, and more than its largest burst, were alive at once. Destroyed at exit or not: the
// memory they hold grows while the program runs.
struct CommPileUp {
  std::string site_key;              // the call site, the same in every process (module+offset)
  const ProcessTrace* process = nullptr;  // the process where most piled up (for its call site)
  const CommInstance* example = nullptr;  // one of them
  uint64_t made = 0;                 // by that process
  uint64_t not_destroyed = 0;        // of them, not destroyed before exit
  uint64_t bursts = 0;               // creation bursts (more than kBurstGapNs apart)
  uint64_t peak_alive = 0;           // most of them alive at once
  uint64_t memory_bytes = 0;         // GPU memory they hold as last read (CommInstance::held), where measured
  double first_s = 0, last_s = 0;    // first and last creation, from the process's start
  std::vector<int32_t> ranks;        // world ranks of the processes where they piled up
};
inline constexpr uint64_t kPileUpMin = 4;
inline constexpr int64_t kBurstGapNs = 1'000'000'000;

// The most communicators one process held alive at once.
struct PeakAlive {
  uint64_t count = 0;
  const ProcessTrace* process = nullptr;
  double at_s = 0;  // from the process's start
};

// A resource released out of order: still held when its communicator was destroyed
// (registrations, windows, device comms: NCCL frees them with it, but the buffer's owner may
// still use them), or a buffer registered on a communicator while an earlier registration of it
// was still held (NCCL does not count references: each takes its own memory or symmetric
// address space).
struct ResourceOrder {
  enum class Kind { kOutlivedComm, kRegisteredTwice } kind;
  const ProcessTrace* process = nullptr;
  const ResourceInstance* resource = nullptr;  // kRegisteredTwice: the later registration
  const ResourceInstance* earlier = nullptr;   // kRegisteredTwice: the one still held
  const CommInstance* comm = nullptr;          // kOutlivedComm: its communicator
};

struct LifecycleFindings {
  std::vector<CommPileUp> pile_ups;
  PeakAlive peak;
  std::vector<ResourceOrder> order;
};

LifecycleFindings lifecycle_findings(const Job& job);

// The call site of `frames` as module+offset of its first `depth` frames: equal in every process
// of one program (addresses differ with each process's load addresses). "" when none falls in a
// module.
std::string site_key(const ProcessTrace& p, const std::vector<uint64_t>& frames, size_t depth);

// The rank a process has in the widest communicator it made: how people name a process.
int32_t world_rank(const ProcessTrace& p);

}  // namespace ncclwatch::model
