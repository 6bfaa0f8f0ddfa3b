// GPU timing (gpu_timer.h): the launch path, on the application's threads. A launch costs no CUDA call unless
// it gets events: the first launch of a burst on a stream, every kMaxUneventedRun-th launch in a
// burst, and launches whose turn it is for timestamps. Stream order lets the next event cover the
// launches between; they travel to the collector with it (gpu_collector.cc). Capture state is
// checked before every event record and remembered per stream in between.
#include "gpu/gpu_timer.h"

#include "gpu/comm_memory.h"

#include "gpu/cuda_driver.h"
#include "gpu/gpu_clock_refs.h"
#include "gpu/gpu_state.h"
#include "process/process.h"

#include <chrono>
#include <mutex>
#include <new>
#include <thread>

namespace ncclwatch {

using gpu::LaunchEvents;
using gpu::LaunchThread;
using gpu::StreamSlot;

namespace {

// Launches closer together than this (from one's return to the next call) form a burst. Between
// PyTorch's collectives the host spends 13-20 us (measured on H200s), so each gets its event;
// back-to-back loops (nccl-tests, XLA thunks) form bursts.
constexpr int64_t kBurstGapNs = 5'000;
// In a burst, one launch in this many gets a completion event: a stall is then named at most
// this many launches early (the first launch after the last one seen complete).
constexpr uint32_t kMaxUneventedRun = 32;
// The first launches of each op shape on a communicator (each CUDA graph's first replays) are
// timestamped, then one in NCCLWATCH_SAMPLE: every latency row gets GPU samples, the first
// (connection set-up) call apart, and a short job is judged on the GPU throughout (a rank whose
// host runs ahead issues 20 ops within a millisecond: the time budget below times few of them).
constexpr uint32_t kFirstTimedPerShape = 16;
// ... and at least one launch per stream in this much host time, so that a short job (20 ops
// 20 ms apart, a graph replayed every few ms) is timed throughout, while a tight loop (a decode
// step every 10-50 us, nccl-tests) stays near one launch in NCCLWATCH_SAMPLE.
constexpr int64_t kTimestampEveryNs = 1'000'000;

// The launch goes ahead, untimed or taken for not captured.
void say_timing_failed() noexcept {
  notice_once(Notice::kGpuTimingFailed,
              "ncclwatch: an internal error in GPU timing; some ops lack their GPU times or their CUDA-graph "
              "capture mark");
}

std::mutex g_threads_mutex;  // registration of a new thread only
std::vector<LaunchThread*>* g_threads = nullptr;

LaunchThread& this_thread() {
  if (t_thread.gpu) return *t_thread.gpu;
  auto* state = new LaunchThread();
  state->tid = gettid();
  std::lock_guard lock(g_threads_mutex);
  if (!g_threads) g_threads = new std::vector<LaunchThread*>();
  g_threads->push_back(state);
  t_thread.gpu = state;
  return *state;
}

// The special handles (legacy and per-thread default streams) mean a different stream on each
// device: their context is the current one, looked up on every launch.
bool is_default_stream(uint64_t stream) { return stream <= 2; }

StreamSlot* stream_slot(LaunchThread& thread, const CudaDriver& cu, uint64_t stream) {
  bool per_device = is_default_stream(stream);
  CUcontext current = nullptr;
  if (per_device && cu.ctx_get_current(&current) != CUDA_SUCCESS) return nullptr;
  for (StreamSlot& slot : thread.streams)
    if (slot.stream == stream && slot.ctx && (!per_device || slot.ctx == current)) return &slot;
  // The stream's own context: one thread may drive several GPUs (ncclCommInitAll, nccl-tests -g).
  CUcontext ctx = current;
  if (!per_device && (!cu.stream_get_ctx || cu.stream_get_ctx(reinterpret_cast<CUstream>(stream), &ctx) != CUDA_SUCCESS || !ctx))
    if (cu.ctx_get_current(&ctx) != CUDA_SUCCESS) return nullptr;
  if (!ctx) return nullptr;
  StreamSlot& slot = thread.streams[thread.next_replaced++ % LaunchThread::kStreams];
  slot = StreamSlot{};
  slot.stream = stream;
  slot.ctx = ctx;
  return &slot;
}

// Checks (one driver call) whether `slot`'s stream is capturing a CUDA graph, and remembers it.
bool check_capturing(const CudaDriver& cu, StreamSlot& slot, bool& failed) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  failed = cu.stream_is_capturing(reinterpret_cast<CUstream>(slot.stream), &status) != CUDA_SUCCESS;
  slot.capturing = !failed && status != CU_STREAM_CAPTURE_STATUS_NONE;
  slot.capture_checked = !failed;
  return slot.capturing;
}

// Whether the launch is timestamped by its shape's turn; `alike`: and past the shape's first launch
// (connection set-up), on a communicator: the launches every rank times (LaunchEvents::timed_alike);
// `first`: that first launch.
bool timestamp_turn(LaunchThread& thread, CommTrack* track, uint64_t shape, uint32_t sample_scale, bool& alike,
                    bool& first) {
  uint32_t n = track ? track->count_launch_of_shape(shape) : thread.untracked_launches++;
  bool turn = n < kFirstTimedPerShape || (n - kFirstTimedPerShape) % (uint64_t{config().sample} * sample_scale) == 0;
  alike = turn && track && n > 0;
  first = track && n == 0;
  return turn;
}

// Whether this launch on `stream` is timestamped because the communicator's previous one was by
// its turn and the communicator is driven from more than one stream (CommTrack::several_streams);
// notes this launch for the next. Plain loads, and stores only on change: no locked instruction.
bool pairs_with_previous_launch(CommTrack& track, uint64_t stream, bool by_turn) {
  if (track.last_stream.load(std::memory_order_relaxed) != stream) {
    if (track.last_stream.load(std::memory_order_relaxed) != 0 && !track.several_streams.load(std::memory_order_relaxed))
      track.several_streams.store(true, std::memory_order_relaxed);
    track.last_stream.store(stream, std::memory_order_relaxed);
  }
  bool pair = !by_turn && track.several_streams.load(std::memory_order_relaxed) &&
              track.last_timed_by_turn.load(std::memory_order_relaxed);
  if (track.last_timed_by_turn.load(std::memory_order_relaxed) != by_turn)
    track.last_timed_by_turn.store(by_turn, std::memory_order_relaxed);
  return pair;
}

LaunchEvents* take_events(LaunchThread& thread, const CudaDriver& cu, CUcontext ctx, bool timed) {
  LaunchEvents* reused = nullptr;
  while (thread.released.pop(reused)) thread.pool.push_back(reused);
  for (size_t i = thread.pool.size(); i-- > 0;) {
    if (thread.pool[i]->ctx == ctx && thread.pool[i]->timed == timed) {
      LaunchEvents* events = thread.pool[i];
      thread.pool[i] = thread.pool.back();
      thread.pool.pop_back();
      return events;
    }
  }
  auto* events = new LaunchEvents();
  events->ctx = ctx;
  events->owner = &thread;
  events->timed = timed;
  // Events are made in the current context: switch to the stream's for the creation if needed.
  RelaxedCaptureMode relaxed(cu);
  CUcontext current = nullptr;
  bool switched = cu.stream_get_ctx && cu.ctx_get_current(&current) == CUDA_SUCCESS && current != ctx &&
                  cu.ctx_push_current(ctx) == CUDA_SUCCESS;
  // Completion-only events skip timestamps, which makes them cheaper to record.
  bool created = timed ? cu.event_create(&events->start, CU_EVENT_DEFAULT) == CUDA_SUCCESS &&
                             cu.event_create(&events->end, CU_EVENT_DEFAULT) == CUDA_SUCCESS
                       : cu.event_create(&events->end, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS;
  if (switched) cu.ctx_pop_current(&current);
  if (!created) {
    delete events;
    return nullptr;
  }
  return events;
}

}  // namespace

namespace gpu {
std::vector<LaunchThread*> launch_threads() {
  std::lock_guard lock(g_threads_mutex);
  return g_threads ? *g_threads : std::vector<LaunchThread*>{};
}
}  // namespace gpu

TimingMode decide_timing_mode() noexcept {
  TimingRequest wanted = config().timing;
  TimingMode decided = TimingMode::kHost;
  if (wanted == TimingRequest::kHost) decided = TimingMode::kHost;
  else if (cuda_driver()) decided = TimingMode::kGpu;
  else if (wanted == TimingRequest::kGpu)
    notice_once(Notice::kNoCudaDriver, "ncclwatch: NCCLWATCH_TIMING=gpu but no usable CUDA driver; timing on the host");
  detail::g_timing_mode.store(static_cast<int>(decided), std::memory_order_release);
  return decided;
}

bool stream_is_capturing(uint64_t stream) noexcept {
  if (timing_mode() != TimingMode::kGpu || gpu::g_stop.load(std::memory_order_relaxed)) return false;
  try {
    const CudaDriver& cu = *cuda_driver();
    StreamSlot* slot = stream_slot(this_thread(), cu, stream);
    if (!slot) return false;
    // What the last check said while it said "not capturing"; a capturing stream is asked again.
    bool failed = false;
    if (!slot->capture_checked || slot->capturing) check_capturing(cu, *slot, failed);
    return slot->capturing;
  } catch (...) {
    say_timing_failed();
    return false;
  }
}

uint64_t stream_capture_id(uint64_t stream) noexcept {
  const CudaDriver* cu = cuda_driver();
  return cu ? capture_id_of(*cu, stream) : 0;
}

namespace {

// `reads_set_up`: a communicator's first launch of a shape is read for memory (not a CUDA graph's
// replay: its set-up ran at capture).
TimedLaunch begin_launch(uint64_t stream, CommTrack* track, uint64_t shape, bool& captured, uint32_t sample_scale,
                         bool reads_set_up) noexcept {
  if (gpu::g_stop.load(std::memory_order_relaxed)) return {};
  try {
    LaunchThread& thread = this_thread();
    const CudaDriver& cu = *cuda_driver();
    StreamSlot* slot = stream_slot(thread, cu, stream);
    if (!slot) return {};
    int64_t now = monotonic_ns();
    bool alike = false, first = false;
    bool by_turn =
        timestamp_turn(thread, track, shape, sample_scale, alike, first) || now - slot->last_timed_ns >= kTimestampEveryNs;
    bool timed = by_turn || (track && pairs_with_previous_launch(*track, stream, by_turn));
    bool starts_burst = now - slot->last_return_ns >= kBurstGapNs;
    if (!timed && !starts_burst && !slot->capturing && slot->unevented_run + 1 < kMaxUneventedRun)
      return TimedLaunch{nullptr, slot, false};  // no driver call: a later event covers it
    // Never record on a capturing stream: the event would become part of the graph.
    bool failed = false;
    if (check_capturing(cu, *slot, failed) || failed) {
      captured = slot->capturing;
      return {};
    }
    if (!slot->clock_ready) {
      gpu::ensure_clock_reference(cu, slot->ctx);
      slot->clock_ready = true;
    }
    LaunchEvents* events = take_events(thread, cu, slot->ctx, timed);
    if (!events) return {};
    events->timed_alike = alike;
    events->start_recorded_ns = monotonic_ns();
    if (timed && cu.event_record(events->start, reinterpret_cast<CUstream>(stream)) != CUDA_SUCCESS) {
      thread.pool.push_back(events);
      *slot = StreamSlot{};  // the stream may be gone: look it up again next time
      return {};
    }
    if (timed) slot->last_timed_ns = now;
    gpu::start_collector();
    return TimedLaunch{events, slot, timed, reads_set_up && first && begin_setup_reading(*track)};
  } catch (...) {
    say_timing_failed();
    return {};
  }
}

}  // namespace

TimedLaunch begin_gpu_timed_launch(uint64_t stream, CommTrack* track, uint64_t shape, bool& captured,
                                   uint32_t sample_scale) noexcept {
  return begin_launch(stream, track, shape, captured, sample_scale, false);
}

TimedLaunch begin_gpu_timed_launch(uint64_t stream, CommTrack* track, uint64_t shape, bool& captured) noexcept {
  return begin_launch(stream, track, shape, captured, 1, true);
}

namespace {

void hand_over_launch(TimedLaunch launch, uint64_t stream, uint64_t launch_id, CommTrack* track, uint64_t seq,
                      trace::Api api, uint32_t ops, int64_t enqueued_ns, int64_t returned_ns,
                      trace::OpTotalsEntry* totals, uint32_t graph) noexcept {
  auto* slot = static_cast<StreamSlot*>(launch.slot);
  auto* events = static_cast<LaunchEvents*>(launch.events);
  LaunchThread& thread = *t_thread.gpu;
  gpu::LaunchName name{launch_id, track, seq, enqueued_ns, static_cast<uint16_t>(api), totals, graph, graph ? ops : 0};
  slot->last_return_ns = returned_ns;
  if (!events) {
    // Remembered here, handed over with the next launch that has events.
    if (slot->unevented_run++ == 0) slot->unevented_first = name;
    return;
  }
  if (cuda_driver()->event_record(events->end, reinterpret_cast<CUstream>(stream)) != CUDA_SUCCESS) {
    thread.pool.push_back(events);
    *slot = StreamSlot{};
    return;
  }
  gpu::Launch entry{events, stream, name, ops, slot->unevented_run, slot->unevented_first};
  slot->unevented_run = 0;
  if (!thread.launches.push(entry)) {
    thread.pool.push_back(events);  // collector far behind: this launch goes unwatched
    notice_once(Notice::kGpuTimingBehind, "ncclwatch: GPU timing fell behind; some launches are recorded untimed");
  }
}

}  // namespace

void end_timed_launch(TimedLaunch launch, uint64_t stream, uint64_t launch_id, CommTrack* track, uint64_t seq,
                      trace::Api api, uint32_t ops, int64_t enqueued_ns, int64_t returned_ns,
                      trace::OpTotalsEntry* totals, uint32_t graph) noexcept {
  if (!launch) return;
  hand_over_launch(launch, stream, launch_id, track, seq, api, ops, enqueued_ns, returned_ns, totals, graph);
  // A set-up call's reading, once its end event is on the stream (the reading takes microseconds).
  // Its op is named by the totals' entry (the op's count and type; a group end's ops), when there is one.
  if (launch.first_of_shape && track) [[unlikely]]
    finish_setup_reading(*track, totals ? SetupCall{totals->api, totals->count, totals->datatype, -1, !launch.shared}
                                        : SetupCall{static_cast<uint16_t>(ops > 1 ? trace::Api::kGroupEnd : api), ops, 0,
                                                    -1, !launch.shared});
}

void stop_gpu_timer(bool let_running_finish) noexcept {
  if (!gpu::g_collector_started.load(std::memory_order_acquire)) return;
  if (let_running_finish && !gpu::g_stop.load(std::memory_order_acquire)) {
    // A full collector cycle that began after this point sees every launch pushed before it.
    gpu::g_hurry.store(true, std::memory_order_relaxed);
    uint64_t first_cycle = gpu::g_cycles.load(std::memory_order_acquire) + 2;
    int64_t start = monotonic_ns(), last_progress = start;
    uint64_t completed = gpu::g_completed.load(std::memory_order_relaxed);
    for (;;) {
      int64_t now = monotonic_ns();
      if (gpu::g_cycles.load(std::memory_order_acquire) >= first_cycle && gpu::g_idle.load(std::memory_order_acquire)) break;
      if (uint64_t c = gpu::g_completed.load(std::memory_order_relaxed); c != completed) completed = c, last_progress = now;
      if (now - last_progress > int64_t{kExitQuietMs} * 1000000 || now - start > int64_t{kExitDrainMs} * 1000000) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  gpu::g_stop.store(true, std::memory_order_release);
  // Wait (bounded) until the collector is outside any CUDA call; it makes no further ones.
  for (int i = 0; i < 200; ++i) {
    if (gpu::g_cuda_mutex.try_lock()) {
      gpu::g_cuda_mutex.unlock();
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void gpu_timer_after_fork_in_child() noexcept {
  // The collector thread does not exist in the child; its events belong to the parent's contexts.
  new (&g_threads_mutex) std::mutex();
  new (&gpu::g_cuda_mutex) std::mutex();
  gpu::clock_refs_after_fork_in_child();
  g_threads = nullptr;
  t_thread.gpu = nullptr;
  gpu::g_collector_started.store(false, std::memory_order_relaxed);
  gpu::g_stop.store(false, std::memory_order_relaxed);
  gpu::g_hurry.store(false, std::memory_order_relaxed);
  gpu::g_idle.store(true, std::memory_order_relaxed);
}

}  // namespace ncclwatch
