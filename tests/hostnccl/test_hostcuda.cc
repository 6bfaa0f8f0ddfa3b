// Single-process tests of the libcuda stand-in: streams, events, capture,
// cuGetProcAddress.
#include "hostcuda.h"

#include <catch2/catch.hpp>
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

// A work item that blocks its stream until opened.
struct Gate {
  std::atomic<bool> open{false};
  static void run(void* p) {
    auto* g = static_cast<Gate*>(p);
    while (!g->open.load()) std::this_thread::sleep_for(1ms);
  }
};

void sleep_150ms(void*) { std::this_thread::sleep_for(150ms); }

void increment(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }

CUstream fresh_stream() {
  CUstream s = nullptr;
  REQUIRE(cuStreamCreate(&s, 0) == CUDA_SUCCESS);
  return s;
}

}  // namespace

TEST_CASE("device count follows HOSTCUDA_DEVICES and defaults to 8") {
  int n = 0;
  unsetenv("HOSTCUDA_DEVICES");
  REQUIRE(cuDeviceGetCount(&n) == CUDA_SUCCESS);
  CHECK(n == 8);
  setenv("HOSTCUDA_DEVICES", "3", 1);
  REQUIRE(cuDeviceGetCount(&n) == CUDA_SUCCESS);
  CHECK(n == 3);
  CUdevice d;
  CHECK(cuDeviceGet(&d, 2) == CUDA_SUCCESS);
  CHECK(d == 2);
  CHECK(cuDeviceGet(&d, 3) == CUDA_ERROR_INVALID_DEVICE);
  unsetenv("HOSTCUDA_DEVICES");
}

TEST_CASE("driver reports version 13000 and initialises") {
  int v = 0;
  CHECK(cuInit(0) == CUDA_SUCCESS);
  REQUIRE(cuDriverGetVersion(&v) == CUDA_SUCCESS);
  CHECK(v == 13000);
}

TEST_CASE("context is current by default and can be set per thread") {
  CUcontext c = nullptr;
  REQUIRE(cuCtxGetCurrent(&c) == CUDA_SUCCESS);
  CHECK(c != nullptr);
  std::thread([] {
    CHECK(cuCtxSetCurrent(nullptr) == CUDA_SUCCESS);
    CUcontext mine = reinterpret_cast<CUcontext>(1);
    CHECK(cuCtxGetCurrent(&mine) == CUDA_SUCCESS);
    CHECK(mine == nullptr);
  }).join();
  CUcontext again = nullptr;
  CHECK(cuCtxGetCurrent(&again) == CUDA_SUCCESS);
  CHECK(again == c);
}

TEST_CASE("each device has one primary context, a name and a distinct uuid") {
  CUcontext c0 = nullptr, c0again = nullptr, c1 = nullptr;
  REQUIRE(cuDevicePrimaryCtxRetain(&c0, 0) == CUDA_SUCCESS);
  REQUIRE(cuDevicePrimaryCtxRetain(&c0again, 0) == CUDA_SUCCESS);
  REQUIRE(cuDevicePrimaryCtxRetain(&c1, 1) == CUDA_SUCCESS);
  CHECK(c0 == c0again);
  CHECK(c0 != c1);
  CHECK(cuDevicePrimaryCtxRetain(&c1, 99) == CUDA_ERROR_INVALID_DEVICE);
  std::thread([c1] {
    REQUIRE(cuCtxSetCurrent(c1) == CUDA_SUCCESS);
    CUdevice d = -1;
    REQUIRE(cuCtxGetDevice(&d) == CUDA_SUCCESS);
    CHECK(d == 1);
  }).join();
  CHECK(cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS);
  char name[64];
  REQUIRE(cuDeviceGetName(name, sizeof name, 1) == CUDA_SUCCESS);
  CHECK(std::string(name).size() > 0);
  CUuuid u0, u1;
  REQUIRE(cuDeviceGetUuid(&u0, 0) == CUDA_SUCCESS);
  REQUIRE(cuDeviceGetUuid(&u1, 1) == CUDA_SUCCESS);
  CHECK(memcmp(u0.bytes, u1.bytes, sizeof u0.bytes) != 0);
}

TEST_CASE("a stream runs its work in FIFO order on one thread") {
  CUstream s = fresh_stream();
  struct Log {
    std::vector<int> order;
    std::vector<std::thread::id> threads;
  } log;
  struct Entry {
    Log* log;
    int i;
  };
  std::vector<Entry> entries;
  for (int i = 0; i < 50; ++i) entries.push_back({&log, i});
  for (auto& e : entries) {
    hostcuda_enqueue(s, [](void* p) {
      auto* e = static_cast<Entry*>(p);
      e->log->order.push_back(e->i);
      e->log->threads.push_back(std::this_thread::get_id());
    }, &e);
  }
  REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
  REQUIRE(log.order.size() == 50);
  for (int i = 0; i < 50; ++i) CHECK(log.order[size_t(i)] == i);
  for (auto t : log.threads) CHECK(t == log.threads.front());
  CHECK(log.threads.front() != std::this_thread::get_id());
  CHECK(hostcuda_pending(s) == 0);
  CHECK(cuStreamDestroy(s) == CUDA_SUCCESS);
}

TEST_CASE("work on a made-up stream pointer gets a worker on first use") {
  CUstream made_up = reinterpret_cast<CUstream>(uintptr_t(0x5eed0000));
  std::atomic<int> n{0};
  hostcuda_enqueue(made_up, increment, &n);
  hostcuda_enqueue(made_up, increment, &n);
  REQUIRE(cuStreamSynchronize(made_up) == CUDA_SUCCESS);
  CHECK(n == 2);
  CHECK(cuStreamQuery(made_up) == CUDA_SUCCESS);
}

TEST_CASE("NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD share the default stream") {
  Gate gate;
  hostcuda_enqueue(nullptr, Gate::run, &gate);
  CHECK(hostcuda_pending(nullptr) == 1);
  CHECK(hostcuda_pending(CU_STREAM_LEGACY) == 1);
  CHECK(hostcuda_pending(CU_STREAM_PER_THREAD) == 1);
  CHECK(cuStreamQuery(CU_STREAM_LEGACY) == CUDA_ERROR_NOT_READY);
  gate.open = true;
  REQUIRE(cuStreamSynchronize(CU_STREAM_PER_THREAD) == CUDA_SUCCESS);
  CHECK(hostcuda_pending(nullptr) == 0);
}

TEST_CASE("an event completes only after the work queued before it") {
  CUstream s = fresh_stream();
  CUevent e;
  REQUIRE(cuEventCreate(&e, 0) == CUDA_SUCCESS);
  CHECK(cuEventQuery(e) == CUDA_SUCCESS);  // never recorded
  Gate gate;
  hostcuda_enqueue(s, Gate::run, &gate);
  REQUIRE(cuEventRecord(e, s) == CUDA_SUCCESS);
  std::this_thread::sleep_for(50ms);
  CHECK(cuEventQuery(e) == CUDA_ERROR_NOT_READY);
  CHECK(cuStreamQuery(s) == CUDA_ERROR_NOT_READY);
  CHECK(hostcuda_pending(s) == 2);
  gate.open = true;
  REQUIRE(cuEventSynchronize(e) == CUDA_SUCCESS);
  CHECK(cuEventQuery(e) == CUDA_SUCCESS);
  CHECK(cuEventDestroy(e) == CUDA_SUCCESS);
}

TEST_CASE("elapsed time measures when events completed, not when they were recorded") {
  CUstream s = fresh_stream();
  CUevent e0, e1, untimed, never;
  REQUIRE(cuEventCreate(&e0, 0) == CUDA_SUCCESS);
  REQUIRE(cuEventCreate(&e1, 0) == CUDA_SUCCESS);
  REQUIRE(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
  REQUIRE(cuEventCreate(&never, 0) == CUDA_SUCCESS);
  REQUIRE(cuEventRecord(e0, s) == CUDA_SUCCESS);
  hostcuda_enqueue(s, sleep_150ms, nullptr);
  REQUIRE(cuEventRecordWithFlags(e1, s, 0) == CUDA_SUCCESS);
  REQUIRE(cuEventRecord(untimed, s) == CUDA_SUCCESS);
  float ms = -1;
  CHECK(cuEventElapsedTime(&ms, e0, e1) == CUDA_ERROR_NOT_READY);  // recorded, not completed
  REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
  REQUIRE(cuEventElapsedTime(&ms, e0, e1) == CUDA_SUCCESS);
  CHECK(ms >= 145.0f);
  CHECK(ms < 5000.0f);
  float ms2 = -1;
  REQUIRE(cuEventElapsedTime_v2(&ms2, e0, e1) == CUDA_SUCCESS);
  CHECK(ms2 == ms);
  CHECK(cuEventElapsedTime(&ms, e0, untimed) == CUDA_ERROR_INVALID_HANDLE);
  CHECK(cuEventElapsedTime(&ms, e0, never) == CUDA_ERROR_INVALID_HANDLE);
}

TEST_CASE("cuStreamWaitEvent makes a stream wait for another stream's event") {
  CUstream a = fresh_stream(), b = fresh_stream();
  CUevent e;
  REQUIRE(cuEventCreate(&e, 0) == CUDA_SUCCESS);
  Gate gate;
  std::atomic<int> n{0};
  hostcuda_enqueue(a, Gate::run, &gate);
  REQUIRE(cuEventRecord(e, a) == CUDA_SUCCESS);
  REQUIRE(cuStreamWaitEvent(b, e, 0) == CUDA_SUCCESS);
  hostcuda_enqueue(b, increment, &n);
  std::this_thread::sleep_for(50ms);
  CHECK(n == 0);
  gate.open = true;
  REQUIRE(cuStreamSynchronize(b) == CUDA_SUCCESS);
  CHECK(n == 1);
}

TEST_CASE("captured work does not run until the graph is launched, then at every launch") {
  CUstream s = fresh_stream();
  std::atomic<int> n{0};
  REQUIRE(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  REQUIRE(cuStreamIsCapturing(s, &st) == CUDA_SUCCESS);
  CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CHECK(hostcuda_is_capturing(s) == 1);
  cuuint64_t id = 0;
  REQUIRE(cuStreamGetCaptureInfo(s, &st, &id, nullptr, nullptr, nullptr, nullptr) == CUDA_SUCCESS);
  CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CHECK(id != 0);
  CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_ERROR_ILLEGAL_STATE);

  hostcuda_enqueue(s, increment, &n);
  hostcuda_enqueue(s, increment, &n);
  CHECK(hostcuda_pending(s) == 0);
  CUgraph g = nullptr;
  REQUIRE(cuStreamEndCapture(s, &g) == CUDA_SUCCESS);
  REQUIRE(cuStreamIsCapturing(s, &st) == CUDA_SUCCESS);
  CHECK(st == CU_STREAM_CAPTURE_STATUS_NONE);
  std::this_thread::sleep_for(20ms);
  CHECK(n == 0);

  CUgraphExec exec = nullptr;
  REQUIRE(cuGraphInstantiate(&exec, g, 0) == CUDA_SUCCESS);
  REQUIRE(cuGraphDestroy(g) == CUDA_SUCCESS);  // the executable graph keeps its items
  REQUIRE(cuGraphLaunch(exec, s) == CUDA_SUCCESS);
  REQUIRE(cuGraphLaunch(exec, s) == CUDA_SUCCESS);
  REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
  CHECK(n == 4);
  CHECK(cuGraphExecDestroy(exec) == CUDA_SUCCESS);
  CHECK(cuStreamEndCapture(s, &g) == CUDA_ERROR_ILLEGAL_STATE);
}

namespace {
struct Counted {
  static inline std::atomic<int> instances{0}, runs{0}, releases{0};
  int value;
  static void run(void* p) { runs += static_cast<Counted*>(p)->value; }
  static void* instantiate(const void* t) {
    ++instances;
    return new Counted(*static_cast<const Counted*>(t));
  }
  static void release(void* p) {
    ++releases;
    delete static_cast<Counted*>(p);
  }
};
}  // namespace

TEST_CASE("work items are instantiated per launch and every copy is released") {
  const hostcuda_work_ops ops = {Counted::run, Counted::instantiate, Counted::release};
  CUstream s = fresh_stream();
  hostcuda_enqueue_work(s, &ops, new Counted{1});  // ordinary: template released at once
  REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
  CHECK(Counted::instances == 1);
  CHECK(Counted::runs == 1);
  CHECK(Counted::releases == 2);

  REQUIRE(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
  hostcuda_enqueue_work(s, &ops, new Counted{10});
  CUgraph g;
  REQUIRE(cuStreamEndCapture(s, &g) == CUDA_SUCCESS);
  CHECK(Counted::instances == 1);
  CUgraphExec exec;
  REQUIRE(cuGraphInstantiateWithFlags(&exec, g, 0) == CUDA_SUCCESS);
  for (int i = 0; i < 3; ++i) REQUIRE(cuGraphLaunch(exec, s) == CUDA_SUCCESS);
  REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
  CHECK(Counted::instances == 4);
  CHECK(Counted::runs == 31);
  CHECK(Counted::releases == 5);
  cuGraphExecDestroy(exec);
  CHECK(Counted::releases == 5);  // the graph still holds the template
  cuGraphDestroy(g);
  CHECK(Counted::releases == 6);
}

TEST_CASE("recording an event on a capturing stream is counted and queues nothing") {
  CUstream s = fresh_stream();
  CUevent e;
  REQUIRE(cuEventCreate(&e, 0) == CUDA_SUCCESS);
  int before = hostcuda_events_recorded_while_capturing();
  REQUIRE(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  CHECK(cuEventRecord(e, s) == CUDA_SUCCESS);
  CHECK(cuEventRecordWithFlags(e, s, 0) == CUDA_SUCCESS);
  CUgraph g;
  REQUIRE(cuStreamEndCapture(s, &g) == CUDA_SUCCESS);
  CHECK(hostcuda_events_recorded_while_capturing() == before + 2);
  CHECK(cuEventQuery(e) == CUDA_SUCCESS);
  cuGraphDestroy(g);
}

TEST_CASE("capture on the default stream is refused") {
  CHECK(cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CHECK(cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL) ==
        CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
}

TEST_CASE("cuGetProcAddress finds entry points by base name and version") {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult status;
  REQUIRE(cuGetProcAddress("cuEventRecord", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &status) == CUDA_SUCCESS);
  CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS);
  CHECK(fn == dlsym(RTLD_DEFAULT, "cuEventRecord"));

  struct Case {
    const char* name;
    int version;
    const char* symbol;
  };
  const Case cases[] = {
      {"cuStreamGetCaptureInfo", 13000, "cuStreamGetCaptureInfo_v3"},
      {"cuStreamGetCaptureInfo", 12000, "cuStreamGetCaptureInfo_v2"},
      {"cuStreamGetCaptureInfo", 11000, "cuStreamGetCaptureInfo"},
      {"cuEventElapsedTime", 13000, "cuEventElapsedTime_v2"},
      {"cuEventElapsedTime", 12000, "cuEventElapsedTime"},
      {"cuStreamBeginCapture", 12000, "cuStreamBeginCapture_v2"},
      {"cuGetProcAddress", 12000, "cuGetProcAddress_v2"},
      {"cuGraphInstantiate", 12000, "cuGraphInstantiateWithFlags"},
      {"cuStreamDestroy", 12000, "cuStreamDestroy_v2"},
      {"cuEventDestroy", 12000, "cuEventDestroy_v2"},
      {"cuStreamSynchronize", 12000, "cuStreamSynchronize"},
      {"cuEventQuery", 12000, "cuEventQuery"},
      {"cuGraphLaunch", 12000, "cuGraphLaunch"},
  };
  for (const auto& c : cases) {
    INFO(c.name << " @" << c.version);
    fn = nullptr;
    REQUIRE(cuGetProcAddress(c.name, &fn, c.version, 0, nullptr) == CUDA_SUCCESS);
    void* expected = dlsym(RTLD_DEFAULT, c.symbol);
    REQUIRE(expected != nullptr);
    CHECK(fn == expected);
  }

  CHECK(cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0, &status) == CUDA_ERROR_NOT_FOUND);
  CHECK(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  CHECK(fn == nullptr);
  CHECK(cuGetProcAddress("cuLaunchHostFunc", &fn, 9000, 0, &status) == CUDA_ERROR_NOT_FOUND);
  CHECK(status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

TEST_CASE("plain and versioned driver symbols are all exported") {
  const char* names[] = {
      "cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuCtxGetCurrent", "cuCtxSetCurrent",
      "cuStreamCreate", "cuStreamCreateWithPriority", "cuStreamDestroy", "cuStreamDestroy_v2",
      "cuStreamSynchronize", "cuStreamQuery", "cuEventCreate", "cuEventRecord", "cuEventRecordWithFlags",
      "cuEventQuery", "cuEventSynchronize", "cuEventElapsedTime", "cuEventElapsedTime_v2", "cuEventDestroy",
      "cuEventDestroy_v2", "cuStreamIsCapturing", "cuStreamGetCaptureInfo", "cuStreamGetCaptureInfo_v2",
      "cuStreamGetCaptureInfo_v3", "cuStreamBeginCapture", "cuStreamBeginCapture_v2", "cuStreamEndCapture",
      "cuGraphInstantiate", "cuGraphInstantiate_v2", "cuGraphInstantiateWithFlags", "cuGraphLaunch",
      "cuGraphDestroy", "cuGraphExecDestroy", "cuGetErrorString", "cuGetErrorName", "cuGetProcAddress",
      "cuGetProcAddress_v2", "cuCtxCreate", "cuCtxCreate_v2", "cuCtxCreate_v4", "cuDevicePrimaryCtxRetain",
      "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", "cuDeviceGetUuid", "cuDeviceGetUuid_v2",
      "cuCtxSynchronize", "cuStreamGetId", "cuLaunchHostFunc", "cuStreamWaitEvent",
      "hostcuda_enqueue", "hostcuda_pending", "hostcuda_events_recorded_while_capturing"};
  for (const char* n : names) {
    INFO(n);
    CHECK(dlsym(RTLD_DEFAULT, n) != nullptr);
  }
}

TEST_CASE("error names and strings") {
  const char* s = nullptr;
  REQUIRE(cuGetErrorName(CUDA_ERROR_NOT_READY, &s) == CUDA_SUCCESS);
  CHECK(std::string(s) == "CUDA_ERROR_NOT_READY");
  REQUIRE(cuGetErrorString(CUDA_SUCCESS, &s) == CUDA_SUCCESS);
  CHECK(std::string(s) == "no error");
  CHECK(cuGetErrorName(CUresult(123456), &s) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("a worker blocked forever does not keep the process from exiting") {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    static Gate never;  // never opened
    CUstream s;
    cuStreamCreate(&s, 0);
    hostcuda_enqueue(s, Gate::run, &never);
    hostcuda_enqueue(nullptr, Gate::run, &never);
    std::this_thread::sleep_for(20ms);
    exit(0);
  }
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 500 && done == 0; ++i) {
    done = waitpid(pid, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(10ms);
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  CHECK(done == pid);
  CHECK(WIFEXITED(status));
}

TEST_CASE("a forked child gets fresh stream workers") {
  CUstream s = fresh_stream();
  std::atomic<int> n{0};
  hostcuda_enqueue(s, increment, &n);
  hostcuda_enqueue(nullptr, increment, &n);
  REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
  REQUIRE(cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::atomic<int> m{0};
    hostcuda_enqueue(s, increment, &m);
    hostcuda_enqueue(nullptr, increment, &m);
    cuStreamSynchronize(s);
    cuStreamSynchronize(nullptr);
    _exit(m == 2 ? 0 : 1);
  }
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 500 && done == 0; ++i) {
    done = waitpid(pid, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(10ms);
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  CHECK(done == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
