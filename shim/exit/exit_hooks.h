// The end of the process: noticing that it began exiting, the exit alert, signals and fork.
// Nothing here calls NCCL or CUDA: at exit they may already be torn down.
#pragma once

#include <atomic>

namespace ncclwatch {

// At the first NCCL call of a process: installs the exit-began hook and the signal handlers.
void attach_process() noexcept;

// True once attach_process has run in this process (a forked child starts unattached). Inline:
// every wrapper asks (recording()).
namespace detail {
inline std::atomic<bool> g_process_attached{false};
}
inline bool process_attached() noexcept {
  // Acquire pairs with the release store at the end of attach_process: every hook is in place.
  return detail::g_process_attached.load(std::memory_order_acquire);
}

// True once the program began exiting: exit() was called, a fatal signal arrived, or the Python
// interpreter is finalizing (PyTorch aborts communicators from destructors at that point).
bool program_exiting() noexcept;

// The image ends without exit(): _exit()/_Exit(status) called directly (multiprocessing workers,
// vfork children), or an exec about to replace it. The trace ends as the image does, with what the
// GPU timing thread still had to record; the alert is printed as at exit. A vfork child (it shares
// our memory) never ends our trace. Called by the interposed functions (exit/image_end_exports.cc).
void image_ends_by_quick_exit(int status) noexcept;
void image_ends_by_exec() noexcept;
// The exec returned (it failed): the process goes on, with our signal handlers back in front.
void exec_failed() noexcept;

}  // namespace ncclwatch
