// Stream workers and their registry. Everything reachable from a worker
// thread is deliberately leaked: workers are detached and may stay blocked
// forever (a collective whose peer never comes), so nothing they touch may be
// destroyed at process exit, and exit must never wait for them.
#include "hostcuda_streams.h"

#include <pthread.h>
#include <signal.h>

#include <ctime>
#include <thread>
#include <unordered_map>

// Handle of a stream made by cuStreamCreate. Never freed, so that a later
// stream never reuses the address of one whose worker may still be busy.
struct CUstream_st {
  char unused;
};

namespace hostcuda {

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Captured::~Captured() {
  if (ops.release) ops.release(tmpl);
}

Worker::Worker() {
  // The stand-in's stream threads keep out of the application's signals, as a driver's should:
  // a test of who takes a process-directed signal then sees only the application's and the shim's.
  sigset_t all, callers;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &callers);
  std::thread([this] { loop(); }).detach();
  pthread_sigmask(SIG_SETMASK, &callers, nullptr);
}

void Worker::push(Item item) {
  std::lock_guard<std::mutex> g(mu_);
  queue_.push_back(std::move(item));
  work_cv_.notify_one();
}

int Worker::pending() {
  std::lock_guard<std::mutex> g(mu_);
  return int(queue_.size()) + running_;
}

void Worker::wait_idle() {
  std::unique_lock<std::mutex> l(mu_);
  idle_cv_.wait(l, [&] { return queue_.empty() && running_ == 0; });
}

void Worker::retire() {
  std::lock_guard<std::mutex> g(mu_);
  retired_ = true;
  work_cv_.notify_one();
}

bool Worker::begin_capture(uint64_t id) {
  std::lock_guard<std::mutex> g(mu_);
  if (capturing_) return false;
  capturing_ = true;
  capture_id_ = id;
  captured_.clear();
  return true;
}

bool Worker::is_capturing() {
  std::lock_guard<std::mutex> g(mu_);
  return capturing_;
}

uint64_t Worker::capture_id() {
  std::lock_guard<std::mutex> g(mu_);
  return capturing_ ? capture_id_ : 0;
}

CapturedList* Worker::capture_target() { return capturing_ ? &captured_ : nullptr; }

CapturedList Worker::end_capture(bool* was_capturing) {
  std::lock_guard<std::mutex> g(mu_);
  *was_capturing = capturing_;
  capturing_ = false;
  CapturedList out;
  out.swap(captured_);
  return out;
}

void Worker::loop() {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    work_cv_.wait(l, [&] { return !queue_.empty() || retired_; });
    if (queue_.empty()) return;  // retired and drained
    Item item = std::move(queue_.front());
    queue_.pop_front();
    running_ = 1;
    l.unlock();
    item.ops.run(item.inst);
    if (item.release_after_run && item.ops.release) item.ops.release(item.inst);
    item.keep.reset();
    l.lock();
    running_ = 0;
    if (queue_.empty()) idle_cv_.notify_all();
  }
}

namespace {

struct Registry {
  std::mutex mu;
  std::unordered_map<CUstream, Worker*> workers;
  Worker* default_worker = nullptr;
};

Registry* g_registry = nullptr;

// A forked child has none of the parent's worker threads: it starts over
// with an empty registry (the parent's is abandoned, its locks included).
void reset_after_fork() { g_registry = new Registry; }

Registry& registry() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_registry = new Registry;  // leaked on purpose, see top of file
    pthread_atfork(nullptr, nullptr, reset_after_fork);
  });
  return *g_registry;
}

}  // namespace

bool is_default_stream(CUstream s) {
  return s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

Worker* worker_for(CUstream s) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  if (is_default_stream(s)) {
    if (!r.default_worker) r.default_worker = new Worker;
    return r.default_worker;
  }
  Worker*& w = r.workers[s];
  if (!w) w = new Worker;
  return w;
}

Worker* find_worker(CUstream s) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  if (is_default_stream(s)) return r.default_worker;
  auto it = r.workers.find(s);
  return it == r.workers.end() ? nullptr : it->second;
}

std::vector<Worker*> all_workers() {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  std::vector<Worker*> out;
  if (r.default_worker) out.push_back(r.default_worker);
  for (const auto& [stream, w] : r.workers) out.push_back(w);
  return out;
}

CUstream new_stream() {
  CUstream s = new CUstream_st{};
  worker_for(s);
  return s;
}

void destroy_stream(CUstream s) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  auto it = r.workers.find(s);
  if (it == r.workers.end()) return;
  it->second->retire();  // queued work still runs, as with CUDA
  r.workers.erase(it);
}

bool enqueue(CUstream stream, const hostcuda_work_ops& ops, void* tmpl) {
  Worker* w = worker_for(stream);
  {
    auto l = w->lock();
    if (CapturedList* target = w->capture_target()) {
      target->push_back(std::make_shared<Captured>(ops, tmpl));
      return true;
    }
  }
  // Instantiate outside the worker lock: it may take NCCL-side locks.
  if (ops.instantiate) {
    void* inst = ops.instantiate(tmpl);
    if (ops.release) ops.release(tmpl);
    w->push(Item{ops, inst, true, nullptr});
  } else {
    w->push(Item{ops, tmpl, true, nullptr});
  }
  return false;
}

void launch(const CapturedList& items, CUstream stream) {
  Worker* w = worker_for(stream);
  for (const auto& c : items) {
    if (c->ops.instantiate) {
      w->push(Item{c->ops, c->ops.instantiate(c->tmpl), true, nullptr});
    } else {
      w->push(Item{c->ops, c->tmpl, false, c});
    }
  }
}

}  // namespace hostcuda
