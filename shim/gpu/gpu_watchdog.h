// The stall watchdog's output: a stall record with every communicator's issued and completed seq,
// and one line on stderr. The collector decides when (gpu_collector.cc).
#pragma once

#include "gpu/gpu_state.h"

#include <ncclwatch/trace_format.h>

#include <cstddef>

namespace ncclwatch::gpu {

// `first` is the oldest launch on `stream` not known complete; `unconfirmed` counts the launches
// on the stream from it on (more than one: `first` is the earliest that may be the stuck one).
void report_stall(const LaunchName& first, uint64_t stream, trace::StallState state, size_t unconfirmed,
                  pid_t issuer_tid) noexcept;

}  // namespace ncclwatch::gpu
