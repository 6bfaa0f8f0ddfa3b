// The GPU memory a communicator holds, measured when it is made and when it is released (never
// on the collective path). When made: NCCL's own count where the library has ncclCommMemStats
// (2.29.7+), else the change in the device's free memory across the call. When released: the
// free memory's change only, since NCCL calls on a communicator being torn down can act on it
// (ncclCommMemStats on one whose abort flag is set aborts its group job) or warn in the
// application's log. Between the two, after each call that may set it up further (its first
// launch of each op shape: NCCL connects an algorithm's peers at its first use, and 2.29+
// allocates most buffers then), both ways again, written as a kMemory record. Only in gpu timing
// mode, where the shim may call the CUDA driver at all.
#pragma once

#include "comms/comms.h"
#include "resolve/resolve.h"

#include <cstdint>

namespace ncclwatch {

// The device's free memory before a call, where a CUDA context is current (else unknown).
struct FreeMemoryBefore {
  int64_t bytes = -1;
};
FreeMemoryBefore free_memory_now() noexcept;

struct CommMemory {
  uint64_t bytes = 0;
  uint32_t flag = 0;  // trace::kFlagMemoryFromNccl or kFlagMemoryFromFreeChange; 0: unknown
};

// What `comm` holds according to NCCL (flag 0 when the library cannot say): its total, less what
// a suspend released (NCCL keeps counting that in the total while suspended). A refusal of a
// communicator just made (`at_creation`), which NCCL also warns about in its log, means the library
// will not say: it is not asked again.
CommMemory nccl_comm_memory(const RealNccl* real, ncclComm_t comm, bool at_creation = true) noexcept;
// The free memory the call took (`taken`) or gave back since `before`.
CommMemory free_memory_change(FreeMemoryBefore before, bool taken) noexcept;

// Before a set-up call (its communicator's first launch of an op shape): reads the device's free
// memory into the track, for finish_setup_reading. False when the call is not read: not in gpu
// mode, or past the communicator's kMaxMemoryReadings. Called by the launch timing (gpu_timer.cc),
// which marks such launches TimedLaunch::first_of_shape.
bool begin_setup_reading(CommTrack& track) noexcept;
// After it: what the communicator holds now (NCCL's count) and what the call took from the device's
// free memory, as a kMemory record; the track's held_bytes follows. Not once the communicator is
// closing (a teardown entered), and only NCCL's count where the free memory's fall is not its own.
struct SetupCall {
  uint16_t api;
  uint64_t count;
  uint8_t datatype;
  int32_t peer;
  bool free_change_is_its_own;  // the launch was this communicator's alone (not a group of several)
};
void finish_setup_reading(CommTrack& track, const SetupCall& call) noexcept;

// After a suspend or resume that succeeded (NCCL 2.29.7+: it releases and takes back the memory it
// can rebuild): what the communicator holds now and the free memory's fall since `before` (negative
// when it rose), as a kMemory record of `api`; the track's held_bytes follows. Not a set-up reading:
// no budget, since each is a call of the application's.
void record_suspend_or_resume(CommTrack& track, uint16_t api, FreeMemoryBefore before) noexcept;

}  // namespace ncclwatch
