// The GPU memory a communicator holds, measured when it is made and when it is released (never
// on the collective path). When made: NCCL's own count where the library has ncclCommMemStats
// (2.29.7+), or the memory the call took where that is larger. When released: the memory's
// change only, since NCCL calls on a communicator being torn down can act on it
// (ncclCommMemStats on one whose abort flag is set aborts its group job) or warn in the
// application's log. Between the two, after each call that may set it up further (its first
// launch of each op shape: NCCL connects an algorithm's peers at its first use, and 2.29+
// allocates most buffers then), both ways again, written as a kMemory record. The change is this
// process's own GPU memory's where NVML has it, else the device's free memory's. Only in gpu
// timing mode, where the shim may call the CUDA driver at all.
#pragma once

#include "comms/comms.h"
#include "resolve/resolve.h"

#include <cstdint>

namespace ncclwatch {

// The GPU memory before a call, where a CUDA context is current: the device's free memory and,
// through NVML where the machine has it, this process's own (process_memory.h).
struct MemorySample {
  int64_t device_free = -1;   // -1: unknown (no context current, not in gpu mode)
  int64_t process_used = -1;  // -1: unknown
  int processes = -1;         // compute processes on the device, this one included (-1: unknown)
};
MemorySample memory_now() noexcept;

struct CommMemory {
  uint64_t bytes = 0;
  uint32_t flag = 0;  // trace::kFlagMemoryFromNccl or kFlagMemoryFromFreeChange (with kFlagMemoryOwnProcess
                      // or kFlagMemorySharedDevice); 0: unknown
};

// What `comm` holds according to NCCL (flag 0 when the library cannot say): its total, less what
// a suspend released (NCCL keeps counting that in the total while suspended). A refusal of a
// communicator just made (`at_creation`), which NCCL also warns about in its log, means the library
// will not say: it is not asked again.
CommMemory nccl_comm_memory(const RealNccl* real, ncclComm_t comm, bool at_creation = true) noexcept;
// The memory the call took (`taken`) or gave back since `before`: by this process's own GPU memory
// where both samples have it, else by the device's free memory (flagged shared when other
// processes were on the device).
CommMemory memory_change(MemorySample before, bool taken) noexcept;
// What a communicator just made holds: NCCL's count, or the memory its creation took where that
// is larger and this process's own (NCCL 2.29+ counts only the buffers its memory manager made).
CommMemory held_at_creation(CommMemory nccl_count, CommMemory taken) noexcept;

// Before a set-up call (its communicator's first launch of an op shape): reads the device's free
// memory into the track, for finish_setup_reading. False when the call is not read: not in gpu
// mode, or past the communicator's kMaxMemoryReadings. Called by the launch timing (gpu_timer.cc),
// which marks such launches TimedLaunch::first_of_shape.
bool begin_setup_reading(CommTrack& track) noexcept;
// After it: what the communicator holds now (NCCL's count) and what the call took (memory_change),
// as a kMemory record; the track's held_bytes follows (held_after). Not once the communicator is
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
void record_suspend_or_resume(CommTrack& track, uint16_t api, MemorySample before) noexcept;

}  // namespace ncclwatch
