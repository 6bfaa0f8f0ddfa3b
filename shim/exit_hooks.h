// The end of the process: noticing that it began exiting, the exit alert, signals and fork.
// Nothing here calls NCCL or CUDA: at exit they may already be torn down.
#pragma once

namespace ncclwatch {

// At the first NCCL call of a process: installs the exit-began hook and the signal handlers.
void attach_process() noexcept;

// True once attach_process has run in this process (a forked child starts unattached).
bool process_attached() noexcept;

// True once the program began exiting: exit() was called, a fatal signal arrived, or the Python
// interpreter is finalizing (PyTorch aborts communicators from destructors at that point).
bool program_exiting() noexcept;

}  // namespace ncclwatch
