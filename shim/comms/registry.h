// What is alive right now: communicators and NCCL resources, for the exit alert.
// The trace holds the full history; this holds only what is still outstanding, in fixed-size
// entries so the signal path can read it without allocating.
#pragma once

#include "process/process.h"

#include <ncclwatch/lifecycle_rules.h>
#include <ncclwatch/trace_format.h>

#include <cstdint>
#include <vector>

namespace ncclwatch {

enum class CommPhase : uint8_t {
  kAlive,           // created, not finalized
  kFinalized,       // ncclCommFinalize returned, no destroy yet
  kFinalizing,      // ncclCommFinalize entered, not returned
  kDestroying,      // ncclCommDestroy entered, not returned
  kAborting,        // ncclCommAbort entered, not returned
  kReleasedAtExit,  // destroyed or aborted only after the program began exiting
};

// How a communicator still in the table ends if the process exits now (lifecycle_rules.h);
// `teardown_inside_ns`: how long its teardown call has been inside (-1 unknown).
constexpr lifecycle::EndState end_state_at_exit(CommPhase phase, int64_t teardown_inside_ns = -1) {
  using lifecycle::teardown_end;
  switch (phase) {
    case CommPhase::kAlive: return lifecycle::EndState::kLeaked;
    case CommPhase::kFinalized: return lifecycle::EndState::kFinalized;
    case CommPhase::kFinalizing: return teardown_end(lifecycle::EndState::kFinalizeHung, teardown_inside_ns);
    case CommPhase::kDestroying: return teardown_end(lifecycle::EndState::kDestroyHung, teardown_inside_ns);
    case CommPhase::kAborting: return teardown_end(lifecycle::EndState::kAbortHung, teardown_inside_ns);
    case CommPhase::kReleasedAtExit: return lifecycle::EndState::kReleasedAtExit;
  }
  return lifecycle::EndState::kLeaked;
}

struct CommEntry {
  uint64_t handle = 0;
  uint64_t id = 0;
  uint64_t parent_id = 0;
  int32_t rank = -1;
  int32_t nranks = -1;
  int32_t device = -1;
  trace::Api created_by = trace::Api::kUnknown;
  trace::Api released_by = trace::Api::kUnknown;  // for kReleasedAtExit
  CommPhase phase = CommPhase::kAlive;
  bool torch_caller = false;
  bool nvshmem_caller = false;  // NVSHMEM made it: nvshmem_finalize releases it
  bool made_during_exit = false;  // by an exit handler or a thread still running: its release is no "at exit"
  int64_t created_ns = 0;
  int64_t teardown_entered_ns = 0;  // kFinalizing, kDestroying, kAborting: when the call was entered
  uint32_t children_made = 0;  // splits/shrinks of this comm issued on this rank
  uint16_t library_id = 0;     // the NCCL library that made it (resolver.h)
  uint64_t memory_bytes = 0;   // GPU memory it held when made (0: unknown)
  char site[192] = {};         // "function (module)" of the creating call
  char python_site[128] = {};  // "train.py:43 (main)": the Python line that made it, if any
  char name[48] = {};          // config->commName
  char process_group[96] = {};  // "process group 3 \"tp\"": PyTorch's group, where the shim saw it made
};

struct ResourceEntry {
  trace::Api acquired_by = trace::Api::kUnknown;
  uint64_t handle = 0;  // pointer, registration handle, window, device comm or redop
  uint64_t comm = 0;
  uint64_t comm_id = 0;
  int32_t rank = -1;
  uint64_t bytes = 0;
  int64_t created_ns = 0;
  char site[192] = {};
  char python_site[128] = {};
};

// Counts kept past the table's entries: communicators created in all, and those released while
// the process ran (released during exit they stay in the table, as released_at_exit).
struct ReleaseTally {
  uint64_t created = 0;
  uint64_t destroyed = 0;
  uint64_t aborted = 0;
};

class Registry {
 public:
  void add_comm(const CommEntry& entry);
  bool find_comm(uint64_t handle, CommEntry& out);
  // Sets the phase of a live comm; returns false if unknown.
  bool set_phase(uint64_t handle, CommPhase phase);
  // A teardown call entered: its phase, and when (for "entered N s before exit, never returned").
  bool enter_teardown(uint64_t handle, CommPhase phase, int64_t time_ns);
  // The order of the next split/shrink of `handle` on this rank (0, 1, ...), or -1 if unknown.
  int64_t take_child_index(uint64_t handle);
  // A destroy/abort returned: forget the comm, or keep it as released-at-exit.
  void release_comm(uint64_t handle, bool during_exit, trace::Api by);

  void add_resource(const ResourceEntry& entry);
  // Forgets the resource acquired by `acquired_by` with this handle; false if unknown.
  bool release_resource(trace::Api acquired_by, uint64_t handle, uint64_t comm);

  // Read under the lock; `wait` false (signal path) gives up if the lock is busy.
  template <class F> bool read(F&& reader, bool wait) {
    if (wait) lock_.lock();
    else if (!lock_.try_lock()) return false;
    struct Unlock {
      SpinLock& lock;
      ~Unlock() { lock.unlock(); }
    } unlock{lock_};  // released even if the reader throws
    reader(comms_, resources_, tally_);
    return true;
  }

  void after_fork_in_child() noexcept;

 private:
  SpinLock lock_;
  std::vector<CommEntry> comms_;
  std::vector<ResourceEntry> resources_;
  ReleaseTally tally_;
};

Registry& registry();
// The table if anything made it, else nullptr; allocates nothing, so a signal handler may call it.
Registry* existing_registry() noexcept;

}  // namespace ncclwatch
