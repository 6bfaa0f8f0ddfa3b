// Internal interface of the CPU stand-in for libcuda.so.1: used by the NCCL
// stand-in to queue work on streams, and by tests to look inside. None of
// this exists in the real driver.
#pragma once

#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

// How a stream worker handles one queued item. `tmpl` is what the caller
// passed; `instantiate` turns it into the instance that actually runs. It is
// called on the enqueuing thread, right away for an ordinary stream, or at
// every cuGraphLaunch when the stream was being captured (so a replay can,
// for example, take a fresh sequence number).
typedef struct hostcuda_work_ops {
  void (*run)(void* inst);                  // on the stream's worker thread
  void* (*instantiate)(const void* tmpl);   // NULL: the instance is tmpl itself
  void (*release)(void* p);                 // frees an instance after it ran, and tmpl
                                            // once unneeded; NULL: nothing to free
} hostcuda_work_ops;

// Queues fn(arg) on the stream (captured instead while the stream captures;
// then it runs at every launch of the graph). arg is owned by the caller.
void hostcuda_enqueue(CUstream stream, void (*fn)(void*), void* arg);

// Queues an item with the ownership rules of hostcuda_work_ops.
void hostcuda_enqueue_work(CUstream stream, const hostcuda_work_ops* ops, void* tmpl);

// 1 while cuStreamBeginCapture..cuStreamEndCapture is open on the stream.
int hostcuda_is_capturing(CUstream stream);

// Items queued on the stream that have not finished (including a running one).
int hostcuda_pending(CUstream stream);

// How many cuEventRecord* calls hit a capturing stream (ncclwatch must never
// record events into a user's capture).
int hostcuda_events_recorded_while_capturing(void);

// Calls the calling thread made to the context, stream-capture, stream-creation and event entry
// points (what an injected profiler's launch path uses).
long hostcuda_driver_calls_on_this_thread(void);

// HOSTCUDA_DEVICES, default 8.
int hostcuda_device_count(void);

// Device memory the NCCL stand-in holds on `device` grows by `delta` bytes (negative: freed), so
// that cuMemGetInfo's free memory moves as a real device's does when communicators come and go.
void hostcuda_account_device_memory(int device, long long delta);

// What this process's stand-in NCCL holds on `device` (the stand-in NVML's figure for it).
long long hostcuda_device_memory_used(int device);

// The device of the calling thread's current context: where its allocations land.
int hostcuda_current_device(void);

#ifdef __cplusplus
}
#endif
