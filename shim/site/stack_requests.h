// Where every Python thread of the process is, written into the trace when a hang is suspected:
// by the stall watchdog (gpu/gpu_watchdog.cc), and when a watcher asks: a file `dump-now` in the
// trace folder (trace_strings.h stacks_record), newer than the last request answered, makes every
// process tracing there write its stacks within a second. The GPU-timing thread looks for it (a
// process in gpu mode that ran an op has one): no thread of its own (one more thread in every
// process, for this, was one too many), no signal (the application may own them all).
#pragma once

#include <string_view>

namespace ncclwatch {

// Writes a Stacks record (nothing in a process without Python). `reason`: stacks_record::kStall or
// kRequested. Never from a signal handler.
void write_python_stacks(std::string_view reason) noexcept;

// Answers a request for stacks made since the last one answered; looks at most once a second (a
// stat()). Called by the GPU-timing thread on its rounds. Requests made before the first look are
// not this process's to answer.
void answer_stack_request() noexcept;
void stack_requests_after_fork_in_child() noexcept;

}  // namespace ncclwatch
