// GPU timing of NCCL launches and the stall watchdog. The launch path (gpu_timer.cc) records CUDA
// events on the application's stream for some launches and hands every launch to a collector
// thread (gpu_collector.cc) through per-thread lock-free rings; the collector turns completed
// events into completion and GpuTimingRecords (on the host clock, gpu_clock_refs.cc) and reports
// stalls (gpu_watchdog.cc). Nothing here synchronizes the application's stream or takes a lock
// shared with other application threads.
#pragma once

#include "comms/comms.h"
#include "gpu/timing_mode.h"

#include <ncclwatch/trace_format.h>

#include <atomic>
#include <cstdint>

namespace ncclwatch {

// Whether `stream` is capturing a CUDA graph, as far as this thread last checked (gpu mode only;
// false otherwise). A driver call only for a stream not seen before or last seen capturing.
bool stream_is_capturing(uint64_t stream) noexcept;

// The CUDA-graph capture `stream` is part of (cuStreamGetCaptureInfo), 0 when none (or no driver).
// One driver call: for when a capture may be open (graph/graph_table.h).
uint64_t stream_capture_id(uint64_t stream) noexcept;

// What identifies an op's "shape" for choosing which launches get timestamps.
inline uint64_t op_shape(trace::Api api, uint64_t count, int datatype) noexcept {
  // MurmurHash3's finalizer: every input bit reaches the low bits that pick a counter.
  uint64_t h = count ^ (static_cast<uint64_t>(api) << 56) ^ (static_cast<uint64_t>(datatype & 0xff) << 48);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}

// A launch under watch: tracked for completion (`slot`), with CUDA events of its own when
// `events` is set, timestamps when `timed`.
struct TimedLaunch {
  void* events = nullptr;
  void* slot = nullptr;
  bool timed = false;
  bool first_of_shape = false;  // its communicator's first launch of this shape, read as a set-up call (comm_memory.h)
  bool shared = false;          // one of a group's several streams or communicators
  explicit operator bool() const { return slot != nullptr; }
};

// Before the launch on `stream`: records the start event when timestamping. Empty when not
// timing (host/off mode, events failed) or when the stream is capturing a CUDA graph — then
// `captured` is set. `track`/`shape` choose the launches that get timestamps.
TimedLaunch begin_gpu_timed_launch(uint64_t stream, CommTrack* track, uint64_t shape, bool& captured) noexcept;
inline TimedLaunch begin_timed_launch(uint64_t stream, CommTrack* track, uint64_t shape, bool& captured) noexcept {
  return timing_mode() == TimingMode::kGpu ? begin_gpu_timed_launch(stream, track, shape, captured) : TimedLaunch{};
}
// The same for a CUDA graph's replay: past the graph's first replays, one in NCCLWATCH_SAMPLE
// times `sample_scale` is timestamped (the time budget still times one per ms).
TimedLaunch begin_gpu_timed_launch(uint64_t stream, CommTrack* track, uint64_t shape, bool& captured,
                                   uint32_t sample_scale) noexcept;
inline TimedLaunch begin_timed_replay(uint64_t stream, CommTrack* track, uint64_t shape, bool& captured,
                                      uint32_t sample_scale) noexcept {
  return timing_mode() == TimingMode::kGpu ? begin_gpu_timed_launch(stream, track, shape, captured, sample_scale)
                                           : TimedLaunch{};
}

// After the launch: records the end event, if any, and hands the launch to the collector.
// `track`/`seq`/`api` name the last op of the launch on this stream (completion, stall reports);
// `returned_ns`: when the call returns to the application (bursts are measured from it); `graph`:
// the index of the CUDA graph a graph launch replays (the watchdog names it), else 0.
void end_timed_launch(TimedLaunch launch, uint64_t stream, uint64_t launch_id, CommTrack* track, uint64_t seq,
                      trace::Api api, uint32_t ops, int64_t enqueued_ns, int64_t returned_ns,
                      trace::OpTotalsEntry* totals, uint32_t graph = 0) noexcept;

// Stops the collector before CUDA may be torn down (exit). With `let_running_finish` (a normal
// exit, from a handler registered when the collector starts), the launches still running first
// get a bounded while to complete, so that ops issued just before exiting keep their timings:
// until none is left, or none completed for kExitQuietMs, at most kExitDrainMs in all. A launch
// still running then is a real finding (it never completed). Idempotent.
inline constexpr int kExitQuietMs = 250;
inline constexpr int kExitDrainMs = 2000;
void stop_gpu_timer(bool let_running_finish = false) noexcept;
// Removes the files beside the trace that watchers read, `<trace>.stalled` (the watchdog's mark)
// and `<trace>.progress` (progress_file.h), as the process ends: a process that is gone is neither
// stalled nor behind its peers. Async-signal-safe.
void clear_watcher_files() noexcept;
void gpu_timer_after_fork_in_child() noexcept;

}  // namespace ncclwatch
