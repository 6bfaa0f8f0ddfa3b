// Where every Python thread of the process is, written into the trace when a hang is suspected:
// by the stall watchdog (gpu/gpu_watchdog.cc), and when a watcher asks: a file `dump-now` in the
// trace folder (trace_strings.h stacks_record), newer than the last request answered, makes every
// process tracing there write its stacks within a second. The GPU-timing thread looks for it (a
// process in gpu mode that ran an op has one): no thread of its own (one more thread in every
// process, for this, was one too many), no signal (the application may own them all).
#pragma once

#include <sys/types.h>

#include <string_view>

namespace ncclwatch {

// Writes a Stacks record: every Python thread's stack (none in a process without Python) and the
// native stack of thread `native_tid` (0: none). `reason`: stacks_record::kStall or kRequested.
// Never from a signal handler, nor from thread `native_tid` itself.
void write_stacks(std::string_view reason, pid_t native_tid) noexcept;

// Answers a request for stacks made since the last one answered; looks at most once a second (an
// lstat()), answers at most once per 5 s (a request within that time waits for it). A request is
// a change of `dump-now`, a regular file of this process's user or root's. Called by the
// GPU-timing thread on its rounds; `native_thread()` names the thread whose native stack to read
// (asked only when there is a request). Requests made before the first look are not this
// process's to answer. Stacks take at most a quarter of the trace's history (write_stacks).
void answer_stack_request(pid_t (*native_thread)()) noexcept;
void stack_requests_after_fork_in_child() noexcept;

}  // namespace ncclwatch
