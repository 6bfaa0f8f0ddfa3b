// Streams, events and graphs of the libcuda stand-in. Each stream is one
// worker thread running its queue in FIFO order.
#pragma once

#include "hostcuda.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace hostcuda {

int64_t now_ns();  // CLOCK_MONOTONIC

// An item held by a graph: its template is released when the last graph or
// executable graph that holds it goes away.
struct Captured {
  hostcuda_work_ops ops;
  void* tmpl;
  Captured(const hostcuda_work_ops& o, void* t) : ops(o), tmpl(t) {}
  Captured(const Captured&) = delete;
  Captured& operator=(const Captured&) = delete;
  ~Captured();
};

using CapturedList = std::vector<std::shared_ptr<Captured>>;

// One queued instance.
struct Item {
  hostcuda_work_ops ops;
  void* inst;
  bool release_after_run;            // false when inst is a graph's shared template
  std::shared_ptr<Captured> keep;    // keeps that template alive while queued
};

class Worker {
 public:
  Worker();
  void push(Item item);
  int pending();
  void wait_idle();
  void retire();  // the stream was destroyed: the thread ends once drained

  // Capture state, guarded by mu_ (see capture_* below).
  bool begin_capture(uint64_t id);
  bool is_capturing();
  uint64_t capture_id();
  CapturedList* capture_target();  // non-null while capturing; call with lock()
  CapturedList end_capture(bool* was_capturing);
  std::unique_lock<std::mutex> lock() { return std::unique_lock<std::mutex>(mu_); }

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable idle_cv_;
  std::deque<Item> queue_;
  int running_ = 0;
  bool retired_ = false;
  bool capturing_ = false;
  uint64_t capture_id_ = 0;
  CapturedList captured_;
};

// The worker of a stream, created on first use for streams never created
// through cuStreamCreate. NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD
// share the process's default-stream worker.
Worker* worker_for(CUstream stream);
// Like worker_for but never creates one (nullptr if the stream is unknown).
Worker* find_worker(CUstream stream);
bool is_default_stream(CUstream stream);
// Every worker that exists now (for cuCtxSynchronize).
std::vector<Worker*> all_workers();
CUstream new_stream();
void destroy_stream(CUstream stream);

// Queues an item, or appends it to the capture. Returns true if captured.
bool enqueue(CUstream stream, const hostcuda_work_ops& ops, void* tmpl);
void launch(const CapturedList& items, CUstream stream);

}  // namespace hostcuda

// Events: a marker item on a stream sets `completed` and the completion time.
struct EventState {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t recorded = 0;   // generation of the latest record
  uint64_t completed = 0;  // highest generation whose marker ran
  int64_t time_ns = 0;     // when that marker ran
  bool timing = true;
};

struct CUevent_st {
  std::shared_ptr<EventState> state;
};

struct CUgraph_st {
  hostcuda::CapturedList items;
};

struct CUgraphExec_st {
  hostcuda::CapturedList items;
};
