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
  kDestroyHung,        // ncclCommDestroy entered, never returned (abort too, in traces before kAbortHung)
  kLeaked,             // alive at exit
  kInitFailed,
  kInitHung,
  // The trace shows it alive, but the trace lost records (full) and the shim's exit record says
  // nothing was alive at exit: released, the record of it lost. Not a leak.
  kReleaseUnrecorded,
  // Stored in traces (the exit record's list): new states go last.
  kFinalizeHung,       // ncclCommFinalize entered, never returned
  kAbortHung,          // ncclCommAbort entered, never returned
  // A teardown call entered less than kTeardownHangNs before the process ended (a launcher's kill
  // right after the program began tearing down): cut short, not hung, and not a leak.
  kEndedInTeardown,
};

// A teardown call is hung once inside this long when the process ends: NCCL's own finalize and
// destroy return well within it (at most 135 ms measured on an H200, two ranks over sockets).
inline constexpr int64_t kTeardownHangNs = 2'000'000'000;

// The end of a communicator whose teardown call (hung state `hung`) had been inside for
// `inside_ns` when the process ended (-1: unknown, taken as hung).
constexpr EndState teardown_end(EndState hung, int64_t inside_ns) {
  return inside_ns >= 0 && inside_ns < kTeardownHangNs ? EndState::kEndedInTeardown : hung;
}

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
    case EndState::kFinalizeHung: return "finalize_hung";
    case EndState::kAbortHung: return "abort_hung";
    case EndState::kEndedInTeardown: return "ended_in_teardown";
  }
  return "unknown";
}

// A teardown call (finalize, destroy, abort) entered and never returned: the process hung (or was
// killed) inside it. Named as such, with how long it had been inside, rather than as a plain leak.
constexpr bool is_teardown_hang(EndState state) {
  return state == EndState::kFinalizeHung || state == EndState::kDestroyHung || state == EndState::kAbortHung;
}

// Inside a teardown call when the process ended: hung there, or cut short.
constexpr bool ended_inside_teardown(EndState state) {
  return is_teardown_hang(state) || state == EndState::kEndedInTeardown;
}

// What `leaks` lists, the exit alert counts and NCCLWATCH_ON_LEAK=fail fails on: never destroyed,
// hung teardowns included. A communicator finalized but never destroyed is not one: its work is
// flushed; it gets a note (kFinalizedNote).
constexpr bool is_leak(EndState state) {
  return state == EndState::kLeaked || state == EndState::kReleasedAtExit || is_teardown_hang(state);
}

inline constexpr const char* kFinalizedNote = "finalized but never destroyed (its host memory stays allocated)";
// After the creation site of a communicator NVSHMEM made, in the alert and `leaks`.
inline constexpr const char* kNvshmemMadeNote = " (by NVSHMEM, for its teams)";

// The remedies printed under leaked communicators, each on a line of its own after kRemedyLead.
inline constexpr const char* kRemedyLead = "  remedy: ";
inline constexpr const char* kTorchRemedy = "call torch.distributed.destroy_process_group() before the program exits";
inline constexpr const char* kNcclRemedy = "call ncclCommFinalize then ncclCommDestroy on each communicator before exit";
// For a teardown that never returned: the call was made, so "call it" is no remedy.
inline constexpr const char* kTeardownHungRemedy =
    "a teardown that never returns waits for work a peer never joined or a GPU that stopped: see each rank's "
    "last collectives (ncclwatch-report hang); ncclCommAbort releases a communicator without waiting";
// For the communicators NVSHMEM made for its teams (PyTorch's NVSHMEM symmetric memory, DeepEP's
// buffer): only NVSHMEM can release them.
inline constexpr const char* kNvshmemRemedy =
    "NVSHMEM made some of them: finalize NVSHMEM before the program exits (nvshmem_finalize; DeepEP: "
    "Buffer.destroy(), before destroy_process_group())";

// Who made the leaked communicators, as far as the remedy goes. The exit alert adds each leaked
// communicator of the process, `leaks` each leaked one of the job.
struct LeakMakers {
  bool nvshmem = false;  // NVSHMEM made one
  bool torch = false;    // PyTorch made one that NVSHMEM did not
  bool other = false;    // one was made by someone but NVSHMEM (PyTorch included)
  bool teardown_hung = false;  // one hung in its teardown: released, as far as the program goes

  // NVSHMEM calls NCCL from inside PyTorch too: a communicator it made counts as NVSHMEM's only.
  constexpr void add(bool made_by_nvshmem, bool made_by_torch, EndState state) {
    if (is_teardown_hang(state)) {
      teardown_hung = true;
      return;
    }
    nvshmem |= made_by_nvshmem;
    torch |= made_by_torch && !made_by_nvshmem;
    other |= !made_by_nvshmem;
  }
};

// The remedies, in the order printed: the hung teardown's; NVSHMEM's for those NVSHMEM made; then
// PyTorch's when PyTorch made one of the others, else NCCL's when anyone else did. Fixed size: the
// alert cannot allocate.
struct Remedies {
  const char* lines[3] = {};
  int count = 0;
  constexpr const char* const* begin() const { return lines; }
  constexpr const char* const* end() const { return lines + count; }
};

constexpr Remedies remedies_for(const LeakMakers& makers) {
  Remedies out;
  if (makers.teardown_hung) out.lines[out.count++] = kTeardownHungRemedy;
  if (makers.nvshmem) out.lines[out.count++] = kNvshmemRemedy;
  if (makers.torch) out.lines[out.count++] = kTorchRemedy;
  else if (makers.other) out.lines[out.count++] = kNcclRemedy;
  return out;
}

}  // namespace ncclwatch::lifecycle
