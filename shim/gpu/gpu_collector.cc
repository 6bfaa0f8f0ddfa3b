// The collector thread: learns of launches with events from the application threads' rings,
// queues them per stream, and polls the oldest on each stream. Its end event covers the launches
// without events issued before it (stream order). Completed launches raise their communicator's
// completed seq and, when timestamped, become GpuTimingRecords on the host clock. A stream whose
// oldest launch not known complete waited longer than NCCLWATCH_STALL_SEC gets a stall report
// (gpu_watchdog.cc). Launches without events after the last one with events are never reported:
// the stream may be idle as well as stuck, and a false alarm is worse than none; a stuck one is
// named once a later launch brings events.
#include "gpu/gpu_clock_refs.h"
#include "gpu/gpu_state.h"
#include "gpu/gpu_timer.h"
#include "gpu/gpu_watchdog.h"
#include "gpu/progress_file.h"
#include "process/process.h"
#include "site/site.h"
#include "trace/trace.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <map>
#include <set>
#include <thread>

namespace ncclwatch::gpu {
namespace {

using trace::StallState;

// The thread that issued a launch (its native stack goes with a stall report).
pid_t issuer(const Launch& launch) { return launch.events && launch.events->owner ? launch.events->owner->tid : 0; }

// The first application thread that launched NCCL work: usually the main one (a watcher's request
// for stacks reads its native stack).
pid_t first_launching_thread() {
  std::vector<LaunchThread*> threads = launch_threads();
  return threads.empty() ? 0 : threads.front()->tid;
}

class Collector {
 public:
  void run() {
    const CudaDriver* cu = cuda_driver();
    // Relaxed for good: this thread's event queries and waits must never invalidate an
    // application thread's CUDA-graph capture (cuda_driver.h).
    CUstreamCaptureMode relaxed = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (cu->exchange_capture_mode) cu->exchange_capture_mode(&relaxed);
    while (!g_stop.load(std::memory_order_acquire)) {
      bool busy = false;
      {
        std::lock_guard cuda_lock(g_cuda_mutex);
        if (g_stop.load(std::memory_order_acquire)) break;
        drain_rings();
        busy = poll(*cu);
      }
      g_idle.store(!busy, std::memory_order_release);
      g_cycles.fetch_add(1, std::memory_order_acq_rel);
      answer_stack_request(first_launching_thread);  // a watcher's request for stacks (site/stack_requests.h)
      publish_progress_for_watchers();
      std::this_thread::sleep_for(std::chrono::microseconds(g_hurry.load(std::memory_order_relaxed) ? 100 : busy ? 500 : 2000));
    }
  }

 private:
  void drain_rings() {
    Launch launch;
    for (LaunchThread* t : launch_threads())
      while (t->launches.pop(launch)) queues_[launch.stream].push_back(launch);
  }

  // Completes what finished, in stream order; returns whether anything is still pending.
  bool poll(const CudaDriver& cu) {
    bool pending = false;
    int64_t stall_ns = static_cast<int64_t>(config().stall_sec * 1e9);
    for (auto& [stream, queue] : queues_) {
      while (!queue.empty()) {
        Launch& front = queue.front();
        CUresult status = cu.event_query(front.events->end);
        if (status == CUDA_ERROR_NOT_READY) {
          pending = true;
          // A stall is a stream that made no progress for the threshold: once a long stall
          // resolves (e.g. an abort), the launches queued behind it are not each reported anew.
          const LaunchName& first = front.first_covered();
          int64_t waiting_since = std::max(first.enqueued_ns, last_progress_[stream]);
          if (!stall_reported_.count(first.launch_id) && monotonic_ns() - waiting_since > stall_ns) {
            report_stall(first, stream, StallState::kStalled, unconfirmed(queue), issuer(front));
            stall_reported_.insert(first.launch_id);
          }
          break;
        }
        last_progress_[stream] = monotonic_ns();
        g_completed.fetch_add(1, std::memory_order_relaxed);
        bool timed = status == CUDA_SUCCESS && front.events->timed;
        if (status == CUDA_SUCCESS) note_completed(front.name);
        const LaunchName& first = front.first_covered();
        if (stall_reported_.erase(first.launch_id)) report_stall(first, stream, StallState::kResolved, 1, 0);
        if (timed) timed_now_.push_back(front);  // its events are given back once written
        else give_back(front.events);
        queue.pop_front();
      }
    }
    write_timings_in_launch_order(cu);
    return pending;
  }

  // The timings completed in this pass, written in launch order across streams: a communicator
  // driven from two streams completes its launches in issue order, and a reader corrects each
  // launch's start by the previous one's end (the analyzers' TimedOps, and count_op_gpu_time here).
  void write_timings_in_launch_order(const CudaDriver& cu) {
    std::sort(timed_now_.begin(), timed_now_.end(),
              [](const Launch& a, const Launch& b) { return a.name.launch_id < b.name.launch_id; });
    for (const Launch& launch : timed_now_) {
      write_timing(cu, launch);
      give_back(launch.events);
    }
    timed_now_.clear();
  }

  // Launches on the stream not known complete (each queued one and those it covers).
  static size_t unconfirmed(const std::deque<Launch>& queue) {
    size_t n = 0;
    for (const Launch& launch : queue) n += 1 + launch.uncovered;
    return n;
  }

  static void note_completed(const LaunchName& launch) {
    if (!launch.track || !launch.seq) return;
    // Relaxed max: a statistic for stall snapshots; seqs complete in order on one stream.
    uint64_t seen = launch.track->completed.load(std::memory_order_relaxed);
    while (seen < launch.seq &&
           !launch.track->completed.compare_exchange_weak(seen, launch.seq, std::memory_order_relaxed)) {
    }
  }

  // When the launch's own work began: NCCL runs a communicator's collectives one after another,
  // so one whose start event fired while the previous seq (on another stream) still ran began at
  // that one's end. The record keeps the event's time (the analyzers apply the same rule); the
  // run's GPU-time totals take this one. Collector thread only.
  static int64_t own_begin(const LaunchName& name, int64_t begin_ns, int64_t end_ns) {
    CommTrack* track = name.track;
    if (!track || !name.seq) return begin_ns;
    if (track->timed_end_seq + 1 == name.seq) begin_ns = std::max(begin_ns, track->timed_end_ns);
    track->timed_end_seq = name.seq;
    track->timed_end_ns = end_ns;
    return begin_ns;
  }

  // Whether the launch's GPU time goes into its communicator's straggler series: one of the launches
  // every rank times alike, of collectives on one stream (a point-to-point launch has no seq, a
  // group over several streams no totals), not a CUDA graph's replay.
  static bool counts_alike(const Launch& launch, int64_t own_ns) {
    const LaunchName& name = launch.name;
    return launch.events->timed_alike && name.track && name.seq && name.totals && !name.graph && own_ns >= 0;
  }

  static void write_timing(const CudaDriver& cu, const Launch& launch) {
    const LaunchEvents& ev = *launch.events;
    ClockReference ref;
    if (!clock_reference_before(cu, ev.ctx, ev.start_recorded_ns, ref)) return;
    float begin_ms = 0, end_ms = 0;
    if (cu.event_elapsed(&begin_ms, ref.event, ev.start) != CUDA_SUCCESS ||
        cu.event_elapsed(&end_ms, ref.event, ev.end) != CUDA_SUCCESS)
      return;
    int64_t begin_ns = ref.host_ns + static_cast<int64_t>(static_cast<double>(begin_ms) * 1e6);
    int64_t end_ns = ref.host_ns + static_cast<int64_t>(static_cast<double>(end_ms) * 1e6);
    int64_t own_ns = end_ns - own_begin(launch.name, begin_ns, end_ns);
    count_op_gpu_time(launch.name.totals, own_ns);
    bool alike = counts_alike(launch, own_ns);
    if (alike) {
      launch.name.track->alike_gpu_ns.fetch_add(static_cast<uint64_t>(own_ns), std::memory_order_relaxed);
      launch.name.track->alike_launches.fetch_add(1, std::memory_order_relaxed);
    }
    RingSlotClaim claim = claim_ring_slot();
    if (!claim) return;
    trace::CompactTiming& rec = claim.slot()->timing;
    rec.launch_id = launch.name.launch_id;
    rec.stream = launch.stream;
    rec.gpu_begin_ns = begin_ns;
    rec.gpu_end_ns = end_ns;
    rec.clock_error_ns = ref.error_ns;
    rec.ops = launch.ops;
    rec.flags = trace::kTimingHasBegin | (alike ? trace::kTimingAlike : 0);
    rec.reserved = 0;
    claim.commit(trace::RingKind::kGpuTiming);
  }

  std::map<uint64_t, std::deque<Launch>> queues_;  // per stream, in launch order
  std::vector<Launch> timed_now_;                   // completed timed launches of one pass
  std::set<uint64_t> stall_reported_;              // launch ids reported stalled, not yet resolved
  std::map<uint64_t, int64_t> last_progress_;      // per stream: when a launch last completed
};

}  // namespace

void start_collector() noexcept {
  // A plain load first: this runs at every launch with events, an exchange is a locked write.
  if (g_collector_started.load(std::memory_order_acquire)) return;
  if (g_collector_started.exchange(true, std::memory_order_acq_rel)) return;
  try {
    // Heap-allocated and never destroyed: the detached thread may still run while exit() runs
    // static destructors (a function-local static here would be destroyed under its feet).
    auto* collector = new Collector();
    start_background_thread("ncclwatch-gpu", [collector] { collector->run(); });
    // Registered now, after CUDA is up (a launch is being timed), so that at a normal exit it runs
    // before CUDA's own exit handlers tear the contexts down: the launches still running get
    // their while to finish, with the driver still there to say when they do.
    atexit([] { stop_gpu_timer(true); });
  } catch (...) {
    notice_once(Notice::kCollectorFailed, "ncclwatch: cannot start the GPU timing thread; ops are recorded untimed");
  }
}

void give_back(LaunchEvents* events) noexcept {
  if (events->owner->released.push(events)) return;
  const CudaDriver* cu = cuda_driver();
  if (events->start) cu->event_destroy(events->start);
  cu->event_destroy(events->end);
  delete events;
}

}  // namespace ncclwatch::gpu
