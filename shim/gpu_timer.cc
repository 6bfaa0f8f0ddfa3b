#include "gpu_timer.h"

#include "clock.h"
#include "config.h"
#include "cuda_driver.h"
#include "notices.h"
#include "trace_writer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <mutex>
#include <thread>
#include <vector>

namespace ncclwatch {
namespace {

using trace::Api;

// ---------------------------------------------------------------------------------------------
// Lock-free single-producer single-consumer ring.
template <class T, uint32_t N> class SpscRing {
  static_assert((N & (N - 1)) == 0);

 public:
  bool push(const T& value) noexcept {
    uint32_t tail = tail_.load(std::memory_order_relaxed);
    // Acquire pairs with the consumer's release of head_: the slot is free to overwrite.
    if (tail - head_.load(std::memory_order_acquire) == N) return false;
    items_[tail & (N - 1)] = value;
    // Release pairs with the consumer's acquire of tail_: it sees the item written above.
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }
  bool pop(T& out) noexcept {
    uint32_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_.load(std::memory_order_acquire)) return false;
    out = items_[head & (N - 1)];
    head_.store(head + 1, std::memory_order_release);
    return true;
  }
  void reset() noexcept {
    head_.store(0, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
  }

 private:
  alignas(64) std::atomic<uint32_t> head_{0};
  alignas(64) std::atomic<uint32_t> tail_{0};
  T items_[N];
};

struct ThreadState;

struct EventPair {
  CUevent start = nullptr;
  CUevent end = nullptr;
  CUcontext ctx = nullptr;
  ThreadState* owner = nullptr;
  int64_t start_recorded_ns = 0;  // host time just before the start event was recorded
  bool timed = false;             // start+end timing events; else one end event for completion only
};

struct Pending {
  EventPair* events = nullptr;
  uint64_t stream = 0;
  uint64_t launch_id = 0;
  CommTrack* track = nullptr;
  uint64_t seq = 0;
  int64_t enqueued_ns = 0;
  uint32_t ops = 0;
  uint16_t api = 0;
};

// One per application thread that launched timed work. Never freed: the collector may still
// drain a thread's ring after the thread exited.
struct ThreadState {
  SpscRing<Pending, 4096> pending;      // application thread → collector
  SpscRing<EventPair*, 8192> released;  // collector → application thread (events to reuse)
  std::vector<EventPair*> pool;         // owner thread only
  uint32_t sample_counter = 0;
};

std::mutex g_threads_mutex;  // registration of a new thread only
std::vector<ThreadState*>* g_threads = nullptr;
thread_local ThreadState* t_state = nullptr;
thread_local CUcontext t_clock_ctx = nullptr;  // the context this thread last saw referenced
struct StreamContext {
  uint64_t stream = 0;
  CUcontext ctx = nullptr;
};
thread_local StreamContext t_stream_ctx[4];
thread_local uint32_t t_stream_ctx_next = 0;

std::atomic<bool> g_collector_started{false};
std::atomic<bool> g_stop{false};
std::mutex g_cuda_mutex;  // held by the collector around its CUDA calls; taken at exit to stop it

ThreadState* thread_state() {
  if (t_state) return t_state;
  auto* state = new ThreadState();
  std::lock_guard lock(g_threads_mutex);
  if (!g_threads) g_threads = new std::vector<ThreadState*>();
  g_threads->push_back(state);
  t_state = state;
  return state;
}

// ---------------------------------------------------------------------------------------------
// The collector.

// A reference point mapping one context's GPU clock onto CLOCK_MONOTONIC: an event recorded on
// an idle private stream and waited for; its host time is known within (t1 - t0) / 2.
struct ClockReference {
  CUevent event = nullptr;
  int64_t host_ns = 0;
  int64_t error_ns = 0;
};

struct ContextClock {
  CUstream stream = nullptr;
  std::deque<ClockReference> refs;  // oldest first
};

// Clock references per context. The first one of a context is taken by the application thread
// that first launches there (once), so every launch has a reference older than itself; the
// collector adds one a second after that. Application threads touch this only once per context.
std::mutex g_clocks_mutex;
std::map<CUcontext, ContextClock>* g_clocks = nullptr;

void record_reference(const CudaDriver& cu, ContextClock& clock) {
  if (!clock.stream && cu.stream_create(&clock.stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return;
  ClockReference ref;
  if (cu.event_create(&ref.event, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return;
  int64_t t0 = monotonic_ns();
  // Our own idle stream: waiting here never waits for the application's work.
  if (cu.event_record(ref.event, clock.stream) != CUDA_SUCCESS || cu.event_synchronize(ref.event) != CUDA_SUCCESS) {
    cu.event_destroy(ref.event);
    return;
  }
  int64_t t1 = monotonic_ns();
  ref.host_ns = t0 + (t1 - t0) / 2;
  ref.error_ns = (t1 - t0) / 2;
  clock.refs.push_back(ref);
  // Keep a minute of references: launches pending longer than that lose their timing.
  while (clock.refs.size() > 64) {
    cu.event_destroy(clock.refs.front().event);
    clock.refs.pop_front();
  }
}

// Takes a reference in `ctx`, leaving the calling thread's current context as it found it (this
// also runs on application threads).
void add_reference(const CudaDriver& cu, CUcontext ctx, ContextClock& clock) {
  CUcontext current = nullptr;
  if (cu.ctx_get_current(&current) != CUDA_SUCCESS) return;
  if (current != ctx && cu.ctx_set_current(ctx) != CUDA_SUCCESS) return;
  record_reference(cu, clock);
  if (current != ctx) cu.ctx_set_current(current);
}

ContextClock& clock_of(CUcontext ctx) {
  if (!g_clocks) g_clocks = new std::map<CUcontext, ContextClock>();
  return (*g_clocks)[ctx];
}

class Collector {
 public:
  void run() {
    const CudaDriver* cu = cuda_driver();
    while (!g_stop.load(std::memory_order_acquire)) {
      bool busy = false;
      {
        std::lock_guard cuda_lock(g_cuda_mutex);
        if (g_stop.load(std::memory_order_acquire)) break;
        drain_rings();
        busy = poll(*cu);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(busy ? 500 : 2000));
    }
  }

 private:
  void drain_rings() {
    std::vector<ThreadState*> threads;
    {
      std::lock_guard lock(g_threads_mutex);
      if (g_threads) threads = *g_threads;
    }
    Pending p;
    for (ThreadState* t : threads)
      while (t->pending.pop(p)) queues_[p.stream].push_back(p);
  }

  // Completes what finished, in stream order; returns whether anything is still pending.
  bool poll(const CudaDriver& cu) {
    bool pending = false;
    int64_t stall_ns = static_cast<int64_t>(config().stall_sec * 1e9);
    for (auto& [stream, queue] : queues_) {
      while (!queue.empty()) {
        Pending& front = queue.front();
        CUresult status = cu.event_query(front.events->end);
        if (status == CUDA_ERROR_NOT_READY) {
          pending = true;
          // A stall is a stream that made no progress for the threshold: once a long stall
          // resolves (e.g. an abort), the ops queued behind it are not each reported anew.
          int64_t waiting_since = std::max(front.enqueued_ns, last_progress_[stream]);
          if (!stall_reported_.count(front.launch_id) && monotonic_ns() - waiting_since > stall_ns)
            report_stall(front, trace::StallState::kStalled);
          break;
        }
        last_progress_[stream] = monotonic_ns();
        if (status == CUDA_SUCCESS) complete(cu, front);
        if (stall_reported_.erase(front.launch_id)) report_stall(front, trace::StallState::kResolved);
        give_back(front.events);
        queue.pop_front();
      }
    }
    return pending;
  }

  void complete(const CudaDriver& cu, const Pending& p) {
    if (p.track) {
      // Relaxed max: a statistic for stall snapshots; seqs complete in order on one stream.
      uint64_t seen = p.track->completed.load(std::memory_order_relaxed);
      while (seen < p.seq && !p.track->completed.compare_exchange_weak(seen, p.seq, std::memory_order_relaxed)) {
      }
    }
    if (!p.events->timed) return;  // completion only
    ClockReference reference;
    if (!reference_for(cu, p.events->ctx, p.events->start_recorded_ns, reference)) return;
    const ClockReference* ref = &reference;
    float begin_ms = 0, end_ms = 0;
    if (cu.event_elapsed(&begin_ms, ref->event, p.events->start) != CUDA_SUCCESS ||
        cu.event_elapsed(&end_ms, ref->event, p.events->end) != CUDA_SUCCESS)
      return;
    RecordSlot slot = reserve_record(sizeof(trace::GpuTimingRecord));
    if (!slot) return;
    auto* rec = slot.as<trace::GpuTimingRecord>();
    rec->launch_id = p.launch_id;
    rec->stream = p.stream;
    rec->gpu_begin_ns = ref->host_ns + static_cast<int64_t>(static_cast<double>(begin_ms) * 1e6);
    rec->gpu_end_ns = ref->host_ns + static_cast<int64_t>(static_cast<double>(end_ms) * 1e6);
    rec->clock_error_ns = ref->error_ns;
    rec->ops = p.ops;
    rec->flags = trace::kTimingHasBegin;
    slot.commit(trace::RecordType::kGpuTiming);
  }

  // The newest reference taken before the launch's start event (so elapsed times are positive
  // and short); a new one every second keeps float milliseconds precise.
  // `recorded_ns`: when the launch's start event was recorded; the reference must precede it.
  bool reference_for(const CudaDriver& cu, CUcontext ctx, int64_t recorded_ns, ClockReference& out) {
    std::lock_guard lock(g_clocks_mutex);
    ContextClock& clock = clock_of(ctx);
    if (clock.refs.empty() || monotonic_ns() - clock.refs.back().host_ns > 1'000'000'000) add_reference(cu, ctx, clock);
    for (auto it = clock.refs.rbegin(); it != clock.refs.rend(); ++it) {
      if (it->host_ns + it->error_ns <= recorded_ns) {
        out = *it;
        return true;
      }
    }
    return false;  // the launch predates every reference we still hold: skip its timing
  }

  void give_back(EventPair* events) {
    if (!events->owner->released.push(events)) {
      const CudaDriver* cu = cuda_driver();
      if (events->start) cu->event_destroy(events->start);
      cu->event_destroy(events->end);
      delete events;
    }
  }

  void report_stall(const Pending& p, trace::StallState state) {
    std::vector<trace::StallComm> comms;
    for_each_comm([&](const CommTrack& t) {
      comms.push_back({t.id, t.issued.load(std::memory_order_relaxed), t.completed.load(std::memory_order_relaxed),
                       t.rank, t.nranks});
    });
    uint32_t size = trace::padded_size(sizeof(trace::StallRecord) + comms.size() * sizeof(trace::StallComm));
    if (size <= trace::kMaxRecordBytes) {
      if (RecordSlot slot = reserve_record(size)) {
        auto* rec = slot.as<trace::StallRecord>();
        rec->time_ns = monotonic_ns();
        rec->launch_id = p.launch_id;
        rec->comm_id = p.track ? p.track->id : 0;
        rec->seq = p.seq;
        rec->enqueued_ns = p.enqueued_ns;
        rec->api = p.api;
        rec->state = static_cast<uint32_t>(state);
        rec->ncomms = static_cast<uint32_t>(comms.size());
        std::memcpy(slot.bytes() + sizeof(trace::StallRecord), comms.data(), comms.size() * sizeof(trace::StallComm));
        slot.commit(trace::RecordType::kStall);
      }
    }
    if (state == trace::StallState::kStalled) {
      stall_reported_.insert(p.launch_id);
      char line[512];
      std::snprintf(line, sizeof(line),
                    "ncclwatch: %s seq %llu on comm %016llx (rank %d/%d) has not completed after %.0f s "
                    "(stream 0x%llx); pending ops of every communicator written to %s\n",
                    trace::api_name(static_cast<Api>(p.api)), static_cast<unsigned long long>(p.seq),
                    static_cast<unsigned long long>(p.track ? p.track->id : 0), p.track ? p.track->rank : -1,
                    p.track ? p.track->nranks : -1, (monotonic_ns() - p.enqueued_ns) / 1e9,
                    static_cast<unsigned long long>(p.stream), trace_path_c());
      ssize_t ignored = ::write(STDERR_FILENO, line, std::strlen(line));
      (void)ignored;
    }
  }

  std::map<uint64_t, std::deque<Pending>> queues_;
  std::set<uint64_t> stall_reported_;
  std::map<uint64_t, int64_t> last_progress_;  // per stream: when a launch last completed
};

void start_collector() {
  if (g_collector_started.exchange(true, std::memory_order_acq_rel)) return;
  try {
    // Heap-allocated and never destroyed: the detached thread may still run while exit() runs
    // static destructors (a function-local static here would be destroyed under its feet).
    auto* collector = new Collector();
    std::thread([collector] { collector->run(); }).detach();
  } catch (...) {
    notice_once(Notice::kInternalError, "ncclwatch: cannot start the GPU timing thread; ops are recorded untimed");
  }
}

EventPair* take_events(ThreadState& state, const CudaDriver& cu, CUcontext ctx, bool timed) {
  EventPair* reused = nullptr;
  while (state.released.pop(reused)) state.pool.push_back(reused);
  for (size_t i = state.pool.size(); i-- > 0;) {
    if (state.pool[i]->ctx == ctx && state.pool[i]->timed == timed) {
      EventPair* pair = state.pool[i];
      state.pool[i] = state.pool.back();
      state.pool.pop_back();
      return pair;
    }
  }
  auto* pair = new EventPair();
  pair->ctx = ctx;
  pair->owner = &state;
  pair->timed = timed;
  // Events are made in the current context: switch to the stream's for the creation if needed.
  CUcontext current = nullptr;
  bool switched = cu.stream_get_ctx && cu.ctx_get_current(&current) == CUDA_SUCCESS && current != ctx &&
                  cu.ctx_push_current(ctx) == CUDA_SUCCESS;
  // Completion-only events skip timestamps, which makes them cheaper to record.
  bool created = timed ? cu.event_create(&pair->start, CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
                             cu.event_create(&pair->end, CU_EVENT_DEFAULT) == CUDA_SUCCESS
                       : cu.event_create(&pair->end, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
  if (switched) cu.ctx_pop_current(&current);
  if (!created) {
    delete pair;
    return nullptr;
  }
  return pair;
}

}  // namespace

TimingMode decide_timing_mode() noexcept {
  const std::string& wanted = config().timing;
  TimingMode decided = TimingMode::kHost;
  if (wanted == "off") decided = TimingMode::kOff;
  else if (wanted == "host") decided = TimingMode::kHost;
  else if (cuda_driver()) decided = TimingMode::kGpu;
  else if (wanted == "gpu")
    notice_once(Notice::kInternalError, "ncclwatch: NCCLWATCH_TIMING=gpu but no usable CUDA driver; timing on the host");
  detail::g_timing_mode.store(static_cast<int>(decided), std::memory_order_release);
  return decided;
}

bool stream_is_capturing(uint64_t stream) noexcept {
  if (timing_mode() != TimingMode::kGpu) return false;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return cuda_driver()->stream_is_capturing(reinterpret_cast<CUstream>(stream), &status) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

TimedLaunch begin_gpu_timed_launch(uint64_t stream, bool& captured) noexcept {
  if (g_stop.load(std::memory_order_relaxed)) return {};
  try {
    ThreadState& state = *thread_state();
    const CudaDriver& cu = *cuda_driver();
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    auto cu_stream = reinterpret_cast<CUstream>(stream);
    // Never record on a capturing stream: the event would become part of the graph.
    if (cu.stream_is_capturing(cu_stream, &capture) != CUDA_SUCCESS) return {};
    if (capture != CU_STREAM_CAPTURE_STATUS_NONE) {
      captured = true;
      return {};
    }
    // Every launch gets a completion event (the watchdog needs it); one in NCCLWATCH_SAMPLE also
    // gets timestamps.
    bool timed = state.sample_counter++ % config().sample == 0;
    // The stream's own context: one thread may drive several GPUs (ncclCommInitAll, nccl-tests -g).
    // A small per-thread cache saves the driver calls for the streams a thread keeps using.
    CUcontext ctx = nullptr;
    for (const auto& entry : t_stream_ctx)
      if (entry.stream == stream && entry.ctx) ctx = entry.ctx;
    if (!ctx) {
      if (!cu.stream_get_ctx || cu.stream_get_ctx(cu_stream, &ctx) != CUDA_SUCCESS || !ctx)
        if (cu.ctx_get_current(&ctx) != CUDA_SUCCESS) return {};
      t_stream_ctx[t_stream_ctx_next++ % 4] = {stream, ctx};
    }
    if (ctx != t_clock_ctx) {
      std::lock_guard lock(g_clocks_mutex);
      ContextClock& clock = clock_of(ctx);
      if (clock.refs.empty()) add_reference(cu, ctx, clock);
      t_clock_ctx = ctx;
    }
    EventPair* pair = take_events(state, cu, ctx, timed);
    if (!pair) return {};
    pair->start_recorded_ns = monotonic_ns();
    if (timed && cu.event_record(pair->start, cu_stream) != CUDA_SUCCESS) {
      state.pool.push_back(pair);
      for (auto& entry : t_stream_ctx) entry = {};  // the stream may be gone: look contexts up again
      return {};
    }
    start_collector();
    return TimedLaunch{pair, timed};
  } catch (...) {
    return {};
  }
}

void end_timed_launch(TimedLaunch launch, uint64_t stream, uint64_t launch_id, CommTrack* track, uint64_t seq,
                      Api api, uint32_t ops, int64_t enqueued_ns) noexcept {
  if (!launch) return;
  auto* pair = static_cast<EventPair*>(launch.pair);
  ThreadState& state = *t_state;
  if (cuda_driver()->event_record(pair->end, reinterpret_cast<CUstream>(stream)) != CUDA_SUCCESS) {
    state.pool.push_back(pair);
    return;
  }
  Pending p;
  p.events = pair;
  p.stream = stream;
  p.launch_id = launch_id;
  p.track = track;
  p.seq = seq;
  p.enqueued_ns = enqueued_ns;
  p.ops = ops;
  p.api = static_cast<uint16_t>(api);
  if (!state.pending.push(p)) {
    state.pool.push_back(pair);  // collector far behind: this launch goes untimed
    notice_once(Notice::kTraceFull, "ncclwatch: GPU timing fell behind; some launches are recorded untimed");
  }
}

void stop_gpu_timer() noexcept {
  if (!g_collector_started.load(std::memory_order_acquire)) return;
  g_stop.store(true, std::memory_order_release);
  // Wait (bounded) until the collector is outside any CUDA call; it makes no further ones.
  for (int i = 0; i < 200; ++i) {
    if (g_cuda_mutex.try_lock()) {
      g_cuda_mutex.unlock();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void gpu_timer_after_fork_in_child() noexcept {
  // The collector thread does not exist in the child; its events belong to the parent's contexts.
  new (&g_threads_mutex) std::mutex();
  new (&g_cuda_mutex) std::mutex();
  new (&g_clocks_mutex) std::mutex();
  g_clocks = nullptr;
  t_clock_ctx = nullptr;
  for (auto& entry : t_stream_ctx) entry = {};
  g_threads = nullptr;
  t_state = nullptr;
  g_collector_started.store(false, std::memory_order_relaxed);
  g_stop.store(false, std::memory_order_relaxed);
}

}  // namespace ncclwatch
