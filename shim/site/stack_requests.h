// Where every Python thread of the process is, written into the trace when a hang is suspected:
// by the stall watchdog (gpu/gpu_watchdog.cc), and when a watcher asks: a file `dump-now` in the
// trace folder (trace_strings.h stacks_record), newer than the last request answered, makes every
// process tracing there write its stacks within a second. No signal is involved: the application
// may own them all.
#pragma once

#include <string_view>

namespace ncclwatch {

// Writes a Stacks record (nothing in a process without Python). `reason`: stacks_record::kStall or
// kRequested. Never from a signal handler.
void write_python_stacks(std::string_view reason) noexcept;

// Starts, once per process, the thread that answers requests for stacks (a stat() a second).
void watch_stack_requests() noexcept;
void stack_requests_after_fork_in_child() noexcept;

}  // namespace ncclwatch
