// What NCCL's proxy thread moved to and from each peer, from its ProxyOp and ProxyStep events
// (NCCLWATCH_PROFILER=peers): NCCL starts a ProxyOp per op, channel, peer and direction on the
// network transport, with the op's Coll/P2p event (our plan slot) as its parent, and a ProxyStep per
// step of it, reporting each step's states (nccl_profiler_abi.h EventState). Each operation becomes
// one OpProxy record at its stop: bytes, and its steps' time split into waiting on this GPU, on the
// peer and network, and the rest. NCCL's proxy thread of the communicator alone calls these.
#pragma once

#include "profiler/profiler_slots.h"

#include <ncclwatch/nccl_profiler_abi.h>

#include <cstdint>

namespace ncclwatch {

struct ProxyOpSlot;

// One step of a proxy operation, between its ProxyStep start and stop.
struct ProxyStepSlot {
  profiler_slots::SlotKind kind = profiler_slots::SlotKind::kProxyStep;
  int state = 0;        // the latest state NCCL reported; 0: posted, none yet
  bool open = false;
  ProxyOpSlot* op = nullptr;
  int64_t start_ns = 0, mark_ns = 0;  // its start; when it entered `state`
};

struct ProxyOpSlot {
  static constexpr uint32_t kSteps = 8;  // NCCL_STEPS: NCCL keeps no more of an operation in flight
  profiler_slots::SlotKind kind = profiler_slots::SlotKind::kProxyOp;
  bool open = false;
  bool send = false;
  uint8_t channel = 0;
  int32_t remote = -1;  // the peer
  uint32_t steps_planned = 0, steps_done = 0, chunk_bytes = 0, flags = 0;
  int64_t start_ns = 0;
  int64_t moving_ns = 0;  // a send's first step's data ready for the network; 0: none yet
  uint64_t bytes = 0, gpu_wait_ns = 0, peer_wait_ns = 0, step_ns = 0;
  profiler_slots::ApiSlot op;
  ProxyStepSlot steps[kSteps];
};

// A communicator's proxy operations in flight: a fixed pool, taken round-robin (an operation still
// open when its slot comes round again, after kCapacity later ones, is written as it stands).
class ProxyOps {
 public:
  static constexpr uint32_t kCapacity = 1024;
  ProxyOps() = default;
  ProxyOps(const ProxyOps&) = delete;
  ProxyOps& operator=(const ProxyOps&) = delete;
  ~ProxyOps();

  bool create() noexcept;  // false: no memory (the communicator then has no OpProxy records)
  bool created() const noexcept { return slots_ != nullptr; }

  // Our handles for NCCL's events: a ProxyOp of `op` (its plan's), a ProxyStep whose parent is
  // `parent`; null where the parent is not one of ours.
  void* start_op(const profiler_slots::ApiSlot& op, const profiler_abi::ProxyOpDescr& d) noexcept;
  void* start_step(void* parent, int step) noexcept;

 private:
  ProxyOpSlot* slots_ = nullptr;
  uint32_t next_ = 0;  // the proxy thread's alone
};

// NCCL's stopEvent and recordEventState for a handle of kind kProxyOp or kProxyStep.
void stop_proxy_event(void* handle, bool write) noexcept;
void record_proxy_step_state(void* handle, int state, const profiler_abi::EventStateArgs* args) noexcept;

}  // namespace ncclwatch
