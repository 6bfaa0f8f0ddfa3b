// GPU timing of NCCL launches: CUDA events recorded on the application's stream around each
// launch, taken from a per-thread pool, handed to a collector thread through per-thread
// lock-free rings. The collector turns completed events into GpuTimingRecords (mapped onto the
// host clock) and runs the stall watchdog. Nothing here synchronizes the application's stream
// or takes a lock shared with other application threads.
#pragma once

#include "comm_table.h"

#include <ncclwatch/trace_format.h>

#include <atomic>
#include <cstdint>

namespace ncclwatch {

enum class TimingMode { kGpu, kHost, kOff };

// NCCLWATCH_TIMING (gpu where a CUDA driver is usable, else host), decided at the first op.
TimingMode decide_timing_mode() noexcept;
namespace detail {
inline std::atomic<int> g_timing_mode{-1};  // TimingMode once decided
}
inline TimingMode timing_mode() noexcept {
  // Acquire pairs with the release in decide_timing_mode(): the driver table is visible.
  int mode = detail::g_timing_mode.load(std::memory_order_acquire);
  return mode >= 0 ? static_cast<TimingMode>(mode) : decide_timing_mode();
}

// True when `stream` is being captured into a CUDA graph (gpu mode only; false otherwise).
bool stream_is_capturing(uint64_t stream) noexcept;

// A launch being timed: the start event is on the stream, the end event not yet.
// A launch under watch: its completion event is pending (and, when sampled, its start event).
struct TimedLaunch {
  void* pair = nullptr;  // the event pair from the pool
  bool timed = false;    // timestamps too (one launch in NCCLWATCH_SAMPLE), not completion only
  explicit operator bool() const { return pair != nullptr; }
};

// Records the start event on `stream`. Empty when not timing (host/off mode, not sampled, events
// failed) or when the stream is capturing a CUDA graph — then `captured` is set.
TimedLaunch begin_gpu_timed_launch(uint64_t stream, bool& captured) noexcept;
inline TimedLaunch begin_timed_launch(uint64_t stream, bool& captured) noexcept {
  return timing_mode() == TimingMode::kGpu ? begin_gpu_timed_launch(stream, captured) : TimedLaunch{};
}

// Records the end event and queues the launch for the collector. `track`/`seq`/`api` name the
// last op of the launch on this stream (for completion tracking and stall reports).
void end_timed_launch(TimedLaunch launch, uint64_t stream, uint64_t launch_id, CommTrack* track, uint64_t seq,
                      trace::Api api, uint32_t ops, int64_t enqueued_ns) noexcept;

// Stops the collector before CUDA may be torn down (exit). Bounded wait; idempotent.
void stop_gpu_timer() noexcept;
void gpu_timer_after_fork_in_child() noexcept;

}  // namespace ncclwatch
