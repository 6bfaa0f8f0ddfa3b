// The Python lines that made a communicator or resource. Read from the calling thread's own
// Python stack without the GIL (PyTorch releases it around NCCL calls, and taking it here could
// deadlock or, during shutdown, end the thread): the thread is inside this native call, so its
// frames stay put; every object is read through a checked copy and type-checked, so a layout we
// got wrong costs the site, never the process.
#pragma once

#include <cstddef>

namespace ncclwatch {

inline constexpr int kMaxPythonFrames = 3;

// Writes up to kMaxPythonFrames lines "path\tline\tfunction\n", innermost first: the frames of
// the program's own code, skipping PyTorch's, DeepEP's and the standard library's (all frames when
// there is no other). Writes "" when the process runs no Python, the thread has no Python stack,
// or the interpreter is finalizing. Where PyTorch is making a process group's communicator, a
// trace::kProcessGroupLine follows with the group's name and description.
void capture_python_site(char* out, size_t size) noexcept;

// Every Python thread's stack, for a hang (the watchdog, a request for stacks): per thread, its
// frames innermost first ("path\tline\tfunction\n", up to kMaxStackFrames, the libraries' too),
// then an empty line; newest thread first, as CPython lists them, up to kMaxStackThreads. Reads
// other threads' frames without stopping them: a thread running Python meanwhile may show fewer
// frames; one blocked (in NCCL, a sleep, a lock) shows where it waits. Returns the threads read.
inline constexpr int kMaxStackFrames = 32;
inline constexpr size_t kMaxStackThreads = 16;
size_t capture_python_stacks(char* out, size_t size) noexcept;

// A child forked while another thread was looking for the interpreter must not inherit its lock.
void python_site_after_fork_in_child() noexcept;

// "train.py:43 (main)" from the first line of a captured site; "" from "".
void short_python_site(const char* site, char* out, size_t size) noexcept;

// "process group 3 \"tensor_parallel\"" from a captured site's kProcessGroupLine (PyTorch's
// "undefined" description left out); "" without one.
void process_group_text(const char* site, char* out, size_t size) noexcept;

}  // namespace ncclwatch
