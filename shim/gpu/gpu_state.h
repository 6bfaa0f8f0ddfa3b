// What the launch path (gpu_timer.cc, on application threads) and the collector thread
// (gpu_collector.cc) share: the launches handed over, the CUDA events they carry, and the flags
// that stop the collector at exit.
#pragma once

#include "comms/comms.h"
#include "gpu/cuda_driver.h"
#include "gpu/spsc_ring.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

namespace ncclwatch::gpu {

struct LaunchThread;

// The CUDA events of one launch: an end event (completion), and a start event when timestamped.
// Made in the stream's context and reused through the owner thread's pool.
struct LaunchEvents {
  CUevent start = nullptr;
  CUevent end = nullptr;
  CUcontext ctx = nullptr;
  LaunchThread* owner = nullptr;
  int64_t start_recorded_ns = 0;  // host time just before the start event was recorded
  bool timed = false;             // start and end timestamps; else one completion-only end event
  // Timestamped by its op shape's turn past the shape's first launch (gpu_timer.cc): every rank of
  // the communicator, running the same program, times the same launches, so their GPU times compare.
  bool timed_alike = false;
};

// Which launch: what completion tracking and stall reports name.
struct LaunchName {
  uint64_t launch_id = 0;
  CommTrack* track = nullptr;  // the comm and seq of the launch's last op on the stream
  uint64_t seq = 0;
  int64_t enqueued_ns = 0;
  uint16_t api = 0;
  trace::OpTotalsEntry* totals = nullptr;  // where its GPU time counts (a launch of one op kind)
  uint32_t graph = 0;      // a CUDA graph's replay: the graph's index (graph_record::kIndex), else 0
  uint32_t graph_ops = 0;  // ... and the NCCL ops it runs
};

// A launch with events, as the collector learns of it. Stream order makes its end event cover
// the launches without events issued on the stream since the previous one with events: the
// first of them is named in `uncovered_first` (they are `uncovered` in all).
struct Launch {
  LaunchEvents* events = nullptr;
  uint64_t stream = 0;
  LaunchName name;
  uint32_t ops = 0;
  uint32_t uncovered = 0;
  LaunchName uncovered_first;
  // The oldest launch this one's event confirms.
  const LaunchName& first_covered() const { return uncovered ? uncovered_first : name; }
};

// One application thread's view of a stream it launches on.
struct StreamSlot {
  uint64_t stream = 0;
  CUcontext ctx = nullptr;
  int64_t last_return_ns = 0;  // when the last launch on it returned to the application
  int64_t last_timed_ns = 0;   // when the last launch on it got timestamps (the host-time budget)
  uint32_t unevented_run = 0;  // launches since the last one that got an event
  LaunchName unevented_first;  // the first of them
  bool capturing = false;      // as of the last check, which precedes every event record
  bool capture_checked = false;
  bool clock_ready = false;    // its context has a clock reference older than any launch here
};

// Per application thread that launched under GPU timing. Never freed: the collector may still
// drain the ring after the thread exited.
struct LaunchThread {
  SpscRing<Launch, 4096> launches;          // application thread → collector
  SpscRing<LaunchEvents*, 8192> released;   // collector → application thread (events to reuse)
  std::vector<LaunchEvents*> pool;          // owner thread only
  static constexpr int kStreams = 16;       // streams remembered; more are looked up again
  StreamSlot streams[kStreams];
  uint32_t next_replaced = 0;
  uint32_t untracked_launches = 0;  // timestamp turns for launches on comms the shim never saw made
  pid_t tid = 0;                    // the application thread (a stall report reads its native stack)
};

// Every LaunchThread so far (a copy: threads register rarely, under a lock). In gpu_timer.cc,
// where threads register.
std::vector<LaunchThread*> launch_threads();

inline std::atomic<bool> g_collector_started{false};
inline std::atomic<bool> g_stop{false};
// The collector's cycles (drain the rings, poll the streams), whether the last one left nothing
// pending, and launches completed so far: what a normal exit waits on (stop_gpu_timer).
inline std::atomic<uint64_t> g_cycles{0};
inline std::atomic<bool> g_idle{true};
inline std::atomic<uint64_t> g_completed{0};
inline std::atomic<bool> g_hurry{false};  // an exit waits: poll without pausing
// Held by the collector around its CUDA calls; stop_gpu_timer() waits for it, so no CUDA call of
// ours runs while the process tears CUDA down.
inline std::mutex g_cuda_mutex;

// Starts the collector thread once (gpu_collector.cc, as is give_back).
void start_collector() noexcept;

// Gives a launch's events back to their owner thread's pool (or frees them when its ring is full).
void give_back(LaunchEvents* events) noexcept;

}  // namespace ncclwatch::gpu
