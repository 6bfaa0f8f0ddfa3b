// How a communicator ended, and what counts as a leak: one list for the shim's exit alert and live
// metrics and for every report, so that they cannot drift apart.
#pragma once

#include <cstdint>

namespace ncclwatch::lifecycle {

enum class EndState : uint8_t {
  kDestroyed,
  kFinalized,          // ncclCommFinalize returned, no destroy followed
  kAborted,
  kReleasedAtExit,     // destroyed or aborted only after the program began exiting
  kDestroyHung,        // destroy or abort entered, never returned
  kLeaked,             // alive at exit
  kInitFailed,
  kInitHung,
  // The trace shows it alive, but the trace lost records (full) and the shim's exit record says
  // nothing was alive at exit: released, the record of it lost. Not a leak.
  kReleaseUnrecorded,
};

constexpr const char* end_state_name(EndState state) {
  switch (state) {
    case EndState::kDestroyed: return "destroyed";
    case EndState::kFinalized: return "finalized";
    case EndState::kAborted: return "aborted";
    case EndState::kReleasedAtExit: return "released_at_exit";
    case EndState::kDestroyHung: return "destroy_hung";
    case EndState::kLeaked: return "leaked";
    case EndState::kInitFailed: return "init_failed";
    case EndState::kInitHung: return "init_hung";
    case EndState::kReleaseUnrecorded: return "release_unrecorded";
  }
  return "unknown";
}

// What `leaks` lists, the exit alert counts and NCCLWATCH_ON_LEAK=fail fails on. A communicator
// finalized but never destroyed is not one: its work is flushed; it gets a note (kFinalizedNote).
constexpr bool is_leak(EndState state) {
  return state == EndState::kLeaked || state == EndState::kReleasedAtExit || state == EndState::kDestroyHung;
}

inline constexpr const char* kFinalizedNote = "finalized but never destroyed (its host memory stays allocated)";
// The remedy printed under leaked communicators: PyTorch's when PyTorch made one of them.
inline constexpr const char* kTorchRemedy = "call torch.distributed.destroy_process_group() before the program exits";
inline constexpr const char* kNcclRemedy = "call ncclCommFinalize then ncclCommDestroy on each communicator before exit";
// ... and NVSHMEM's, for the communicators NVSHMEM made for its teams (PyTorch's NVSHMEM symmetric
// memory, DeepEP's buffer): only NVSHMEM can release them.
// After the creation site of a communicator NVSHMEM made, in the alert and `leaks`.
inline constexpr const char* kNvshmemMadeNote = " (by NVSHMEM, for its teams)";
inline constexpr const char* kNvshmemRemedy =
    "NVSHMEM made some of them: finalize NVSHMEM before the program exits (nvshmem_finalize; DeepEP: "
    "Buffer.destroy(), before destroy_process_group())";

}  // namespace ncclwatch::lifecycle
