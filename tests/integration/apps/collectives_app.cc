// A multi-process NCCL program issuing collectives, groups and point-to-point calls, run under
// the preloaded shim by tests/integration/test_collectives.py.
//   collectives_app mixed|skip|skip-burst|shapes|newer-api|capture|capture-while-polled|late-peer|
//                   graph-replays [REPLAYS [RANK1_REPLAYS [runtime]]]|graph-hostile|bench-graph N|straggler-short|bench N|bench-driver-calls N|count-mismatch|skip-interleaved|straggler|straggler-async|
//                   one-process-two-ranks|config-variants|soak N
#include "hostcuda.h"
#include "check.h"
#include "resolve/nccl_api.h"  // the *Config collectives of NCCL 2.31
#include "rendezvous.h"

#include <cuda.h>
#include <nccl.h>

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

// A CUDA driver call that must succeed.
#define CHECK_CU(call)                                                                          \
  do {                                                                                          \
    CUresult r_ = (call);                                                                       \
    if (r_ != CUDA_SUCCESS) {                                                                   \
      std::fprintf(stderr, "%s failed: CUDA error %d (%s:%d)\n", #call, static_cast<int>(r_), \
                   __FILE__, __LINE__);                                                         \
      std::exit(3);                                                                             \
    }                                                                                           \
  } while (0)


ncclComm_t init_world(const char* tag) {
  ncclUniqueId id = rendezvous_unique_id(tag);
  ncclComm_t comm = nullptr;
  CHECK(ncclCommInitRank(&comm, test_nranks(), id, test_rank()));
  return comm;
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Lets the shim's collector see the last events complete before the process exits.
void settle(CUstream stream) {
  cuStreamSynchronize(stream);
  sleep_ms(50);
}

// Every kind of op, grouped and not, on two communicators, with send/recv around a ring.
int mixed() {
  int rank = test_rank(), n = test_nranks();
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  ncclComm_t world = init_world("world");
  ncclComm_t half = nullptr;
  CHECK(ncclCommSplit(world, rank % 2, rank, &half, nullptr));
  std::vector<float> a(4096 * n, 1.0f), b(4096 * n, 0.0f);
  CHECK(ncclAllReduce(a.data(), b.data(), 1024, ncclFloat, ncclSum, world, stream));
  CHECK(ncclGroupStart());
  CHECK(ncclAllReduce(a.data(), b.data(), 512, ncclFloat, ncclMax, world, stream));
  CHECK(ncclBroadcast(a.data(), b.data(), 256, ncclFloat, 1 % n, world, stream));
  CHECK(ncclGroupEnd());
  CHECK(ncclAllReduce(a.data(), a.data(), 64, ncclFloat, ncclSum, half, stream));
  CHECK(ncclGroupStart());
  CHECK(ncclSend(a.data(), 100, ncclFloat, (rank + 1) % n, world, stream));
  CHECK(ncclRecv(b.data(), 100, ncclFloat, (rank + n - 1) % n, world, stream));
  CHECK(ncclGroupEnd());
  CHECK(ncclAllGather(a.data(), b.data(), 128, ncclFloat, world, stream));
  CHECK(ncclReduceScatter(a.data(), b.data(), 128, ncclFloat, ncclSum, world, stream));
  CHECK(ncclReduce(a.data(), b.data(), 300, ncclFloat, ncclMin, 0, world, stream));
  CHECK(ncclAlltoAll(a.data(), b.data(), 16, ncclFloat, world, stream));
  CHECK(ncclGather(a.data(), b.data(), 32, ncclFloat, n - 1, world, stream));
  CHECK(ncclScatter(a.data(), b.data(), 32, ncclFloat, 0, world, stream));
  CHECK(ncclBcast(a.data(), 8, ncclFloat, 0, half, stream));
  CHECK(ncclGroupStart());
  CHECK(ncclGroupStart());  // nested: one launch
  CHECK(ncclAllReduce(a.data(), b.data(), 10, ncclFloat, ncclSum, world, stream));
  CHECK(ncclGroupEnd());
  CHECK(ncclAllReduce(a.data(), b.data(), 20, ncclFloat, ncclSum, half, stream));
  CHECK(ncclGroupEnd());
  settle(stream);
  CHECK(ncclCommDestroy(half));
  CHECK(ncclCommDestroy(world));
  return 0;
}

// Memory NCCL takes after init (the stand-in: HOSTNCCL_SETUP_MIB at each communicator's first op of
// each kind). On world: all-reduce 1024 (sets up), again (same shape: not read), all-reduce 512 (a
// new shape, nothing new set up), a send/receive group around the ring (sets up sends and
// receives), all-gather (sets up). On a split: one all-reduce, then destroyed. World is left alive,
// `linger_ms` more before the exit.
int set_up_memory(int linger_ms) {
  int rank = test_rank(), n = test_nranks();
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  ncclComm_t world = init_world("world");
  ncclComm_t half = nullptr;
  CHECK(ncclCommSplit(world, 0, rank, &half, nullptr));
  std::vector<float> a(1024 * n, 1.0f), b(1024 * n, 0.0f);
  CHECK(ncclAllReduce(a.data(), b.data(), 1024, ncclFloat, ncclSum, world, stream));
  CHECK(ncclAllReduce(a.data(), b.data(), 1024, ncclFloat, ncclSum, world, stream));
  CHECK(ncclAllReduce(a.data(), b.data(), 512, ncclFloat, ncclSum, world, stream));
  CHECK(ncclGroupStart());
  CHECK(ncclSend(a.data(), 100, ncclFloat, (rank + 1) % n, world, stream));
  CHECK(ncclRecv(b.data(), 100, ncclFloat, (rank + n - 1) % n, world, stream));
  CHECK(ncclGroupEnd());
  CHECK(ncclAllGather(a.data(), b.data(), 128, ncclFloat, world, stream));
  CHECK(ncclAllReduce(a.data(), a.data(), 64, ncclFloat, ncclSum, half, stream));
  settle(stream);
  CHECK(ncclCommDestroy(half));
  sleep_ms(linger_ms);
  return 0;
}

// Suspend and resume (NCCL 2.29.7): world (HOSTNCCL_COMM_MIB when made) sets up an all-reduce and
// an all-gather (2 x HOSTNCCL_SETUP_MIB), is suspended (giving those back), resumed (taking them
// again), all-reduces once more, and is suspended again until the exit: a leak holding its init's.
int suspend_memory() {
  int n = test_nranks();
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  ncclComm_t world = init_world("world");
  std::vector<float> a(256 * n, 1.0f), b(256 * n, 0.0f);
  CHECK(ncclAllReduce(a.data(), b.data(), 256, ncclFloat, ncclSum, world, stream));
  CHECK(ncclAllGather(a.data(), b.data(), 256, ncclFloat, world, stream));
  settle(stream);
  CHECK(ncclCommSuspend(world, 1));
  sleep_ms(100);
  CHECK(ncclCommResume(world));
  CHECK(ncclAllReduce(a.data(), b.data(), 256, ncclFloat, ncclSum, world, stream));
  settle(stream);
  CHECK(ncclCommSuspend(world, 1));
  return 0;
}

// Rank 1 skips the 3rd of 5 identical all-reduces: rank 0's 5th never completes.
int skip(int wait_ms) {
  ncclComm_t world = init_world("world");
  static float data[256];
  for (int i = 1; i <= 5; ++i) {
    if (test_rank() == 1 && i == 3) continue;
    CHECK(ncclAllReduce(data, data, 256, ncclFloat, ncclSum, world, nullptr));
  }
  sleep_ms(wait_ms);  // the watchdog fires meanwhile on rank 0
  return 0;
}

// Back-to-back all-reduces on one stream; rank 1 issues only the first 20 of 60, so rank 0's 21st
// never completes while its host goes on launching (as NCCL's does until its queue fills). Rank 1
// is then idle, not stuck. Every rank then waits for the watchdog.
int skip_burst(int wait_ms) {
  ncclComm_t world = init_world("world");
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  static float data[64];
  int last = test_rank() == 1 ? 20 : 60;
  for (int i = 1; i <= last; ++i) CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, world, stream));
  sleep_ms(wait_ms);
  return 0;
}

// Op shapes on one communicator, for the timestamp sampling: 20 all-reduces of 1024 floats, 3 of
// 7, 10 broadcasts of 1024, and 6 groups of two all-reduces.
int shapes() {
  ncclComm_t world = init_world("world");
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  static float data[1024];
  for (int i = 0; i < 20; ++i) CHECK(ncclAllReduce(data, data, 1024, ncclFloat, ncclSum, world, stream));
  for (int i = 0; i < 3; ++i) CHECK(ncclAllReduce(data, data, 7, ncclFloat, ncclSum, world, stream));
  for (int i = 0; i < 10; ++i) CHECK(ncclBroadcast(data, data, 1024, ncclFloat, 0, world, stream));
  for (int i = 0; i < 6; ++i) {
    CHECK(ncclGroupStart());
    CHECK(ncclAllReduce(data, data, 16, ncclFloat, ncclSum, world, stream));
    CHECK(ncclAllReduce(data, data, 32, ncclFloat, ncclSum, world, stream));
    CHECK(ncclGroupEnd());
  }
  settle(stream);
  CHECK(ncclCommDestroy(world));
  return 0;
}

// NCCL 2.29's additions: suspend and resume, one-sided signals on a window, and a grow the
// stand-in refuses (its failure must be recorded and leave no communicator behind).
int newer_api() {
  int rank = test_rank(), n = test_nranks();
  ncclComm_t world = init_world("world");
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  static float data[256];
  ncclWindow_t window = nullptr;
  CHECK(ncclCommWindowRegister(world, data, sizeof(data), &window, 0));
  CHECK(ncclCommSuspend(world, 1));
  CHECK(ncclCommResume(world));
  CHECK(ncclPutSignal(data, 64, ncclFloat, (rank + 1) % n, window, 0, 0, 0, 0, world, stream));
  CHECK(ncclSignal((rank + 1) % n, 1, 0, 0, world, stream));
  int dummy_desc[4] = {};
  CHECK(ncclWaitSignal(1, reinterpret_cast<ncclWaitSignalDesc_t*>(dummy_desc), world, stream));
  CHECK(ncclAllReduce(data, data, 256, ncclFloat, ncclSum, world, stream));
  ncclComm_t grown = nullptr;
  ncclResult_t grow = ncclCommGrow(world, n + 1, nullptr, -1, &grown, nullptr);
  std::printf("grow: %d\n", static_cast<int>(grow));
  settle(stream);
  CHECK(ncclCommWindowDeregister(world, window));
  CHECK(ncclCommDestroy(world));
  return grow != ncclSuccess && grown == nullptr ? 0 : 4;
}

// An all-reduce captured into a graph, then replayed twice.
int capture() {
  ncclComm_t world = init_world("world");
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  static float data[64];
  CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, world, stream));
  cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
  CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, world, stream));
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  cuStreamEndCapture(stream, &graph);
  cuGraphInstantiate(&exec, graph, 0);
  cuGraphLaunch(exec, stream);
  cuGraphLaunch(exec, stream);
  settle(stream);
  int recorded = hostcuda_events_recorded_while_capturing();
  std::printf("events recorded while capturing: %d\n", recorded);
  CHECK(ncclCommDestroy(world));
  return recorded == 0 ? 0 : 4;
}

// A capture in global mode (PyTorch's default) on one stream while the shim's collector polls an
// event pending on another: the capture must survive (a query from a thread not in relaxed mode
// would invalidate it, as CUDA does). Exit 5 when the capture was invalidated.
int capture_while_polled() {
  ncclComm_t world = init_world("world");
  CUstream busy = nullptr, captured = nullptr;
  cuStreamCreate(&busy, 0);
  cuStreamCreate(&captured, 0);
  static float data[64];
  cuLaunchHostFunc(busy, [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(150)); }, nullptr);
  CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, world, busy));  // its event stays pending
  sleep_ms(5);
  cuStreamBeginCapture(captured, CU_STREAM_CAPTURE_MODE_GLOBAL);
  CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, world, captured));
  sleep_ms(40);  // the collector polls the pending event meanwhile
  CUgraph graph = nullptr;
  CUresult ended = cuStreamEndCapture(captured, &graph);
  std::printf("end of capture: %d\n", static_cast<int>(ended));
  settle(busy);  // one communicator runs one collective at a time: the replay comes after
  if (ended == CUDA_SUCCESS) {
    CUgraphExec exec = nullptr;
    cuGraphInstantiate(&exec, graph, 0);
    cuGraphLaunch(exec, captured);
  }
  settle(captured);
  CHECK(ncclCommDestroy(world));
  return ended == CUDA_SUCCESS ? 0 : 5;
}

// The driver entry points a graph job uses, reached either by name (linked against libcuda) or as
// the CUDA runtime reaches them: dlopen + dlsym("cuGetProcAddress_v2"), then cuGetProcAddress.
struct GraphCalls {
  CUresult (*begin_capture)(CUstream, CUstreamCaptureMode) = cuStreamBeginCapture;
  CUresult (*end_capture)(CUstream, CUgraph*) = cuStreamEndCapture;
  CUresult (*instantiate)(CUgraphExec*, CUgraph, unsigned long long) = cuGraphInstantiate;
  CUresult (*launch)(CUgraphExec, CUstream) = cuGraphLaunch;
  CUresult (*exec_destroy)(CUgraphExec) = cuGraphExecDestroy;
};

template <class Fn> void from_proc_address(CUresult (*get)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*),
                                           const char* name, Fn& out) {
  void* fn = nullptr;
  CHECK_CU(get(name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, nullptr));
  out = reinterpret_cast<Fn>(fn);
}

GraphCalls graph_calls(bool like_the_runtime) {
  GraphCalls calls;
  if (!like_the_runtime) return calls;
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get = reinterpret_cast<GetProcAddress>(driver ? dlsym(driver, "cuGetProcAddress_v2") : nullptr);
  if (!get) std::exit(6);
  from_proc_address(get, "cuStreamBeginCapture", calls.begin_capture);
  from_proc_address(get, "cuStreamEndCapture", calls.end_capture);
  from_proc_address(get, "cuGraphInstantiate", calls.instantiate);
  from_proc_address(get, "cuGraphLaunch", calls.launch);
  from_proc_address(get, "cuGraphExecDestroy", calls.exec_destroy);
  return calls;
}

// Three eager all-reduces, a fourth captured into a graph, then `replays` launches of the graph
// (rank 1 launches `rank1_replays`), then one more eager all-reduce: a decode loop in miniature.
int graph_replays(int replays, int rank1_replays, bool like_the_runtime) {
  GraphCalls cu = graph_calls(like_the_runtime);
  ncclComm_t world = init_world("world");
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  static float data[256];
  for (int i = 0; i < 3; ++i) CHECK(ncclAllReduce(data, data, 256, ncclFloat, ncclSum, world, stream));
  CHECK_CU(cu.begin_capture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK(ncclAllReduce(data, data, 256, ncclFloat, ncclSum, world, stream));
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  CHECK_CU(cu.end_capture(stream, &graph));
  CHECK_CU(cu.instantiate(&exec, graph, 0));
  int launches = test_rank() == 1 ? rank1_replays : replays;
  for (int i = 0; i < launches; ++i) {
    CHECK_CU(cu.launch(exec, stream));
    sleep_ms(2);  // a decode step's host work between replays
  }
  std::printf("events recorded while capturing: %d\n", hostcuda_events_recorded_while_capturing());
  std::fflush(stdout);
  if (rank1_replays < replays) {
    // Rank 0's last replay waits for a peer that never comes: it is stopped as a job at its
    // timeout would be; rank 1 exits without destroying the communicator.
    if (test_rank() == 0) {
      sleep_ms(300);
      kill(getpid(), SIGTERM);
    }
    settle(stream);
    return 0;
  }
  CHECK(ncclAllReduce(data, data, 256, ncclFloat, ncclSum, world, stream));
  settle(stream);
  cu.exec_destroy(exec);
  CHECK(ncclCommDestroy(world));
  return 0;
}

// What a graph job may do that the shim must follow or say it could not, each answered by CUDA as
// without the shim: a graph destroyed while its exec lives, an exec launched on another stream, an
// exec updated to a graph without NCCL ops, a capture in relaxed mode, a capture invalidated.
int graph_hostile() {
  ncclComm_t world = init_world("world");
  CUstream stream = nullptr, other = nullptr;
  cuStreamCreate(&stream, 0);
  cuStreamCreate(&other, 0);
  static float data[64];
  auto capture = [&](CUstreamCaptureMode mode, bool nccl) {
    CHECK_CU(cuStreamBeginCapture(stream, mode));
    if (nccl) CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, world, stream));
    else cuLaunchHostFunc(stream, [](void*) {}, nullptr);
    CUgraph graph = nullptr;
    CHECK_CU(cuStreamEndCapture(stream, &graph));
    return graph;
  };
  CUgraph first = capture(CU_STREAM_CAPTURE_MODE_GLOBAL, true);
  CUgraphExec exec = nullptr;
  CHECK_CU(cuGraphInstantiate(&exec, first, 0));
  CHECK_CU(cuGraphDestroy(first));      // its exec keeps its ops: seq 1
  CHECK_CU(cuGraphLaunch(exec, stream));
  settle(stream);
  CHECK_CU(cuGraphLaunch(exec, other));  // another stream: seq 2
  settle(other);
  CUgraph plain = capture(CU_STREAM_CAPTURE_MODE_GLOBAL, false);
  CHECK_CU(cuGraphExecUpdate(exec, plain, nullptr));
  CHECK_CU(cuGraphLaunch(exec, stream));  // runs no NCCL op now: no seq
  CUgraph relaxed = capture(CU_STREAM_CAPTURE_MODE_RELAXED, true);
  CUgraphExec relaxed_exec = nullptr;
  CHECK_CU(cuGraphInstantiate(&relaxed_exec, relaxed, 0));
  CHECK_CU(cuGraphLaunch(relaxed_exec, stream));  // seq 3
  settle(stream);
  // A query that may synchronize, during a global-mode capture, invalidates it (as CUDA does).
  CUevent event = nullptr;
  cuEventCreate(&event, 0);
  CHECK_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, world, stream));
  CUresult query = cuEventQuery(event);
  CUgraph lost = nullptr;
  CUresult ended = cuStreamEndCapture(stream, &lost);
  std::printf("invalidated capture: query %d, end %d, graph %s\n", static_cast<int>(query), static_cast<int>(ended),
              lost ? "made" : "none");
  CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, world, stream));  // seq 4, eager
  settle(stream);
  CHECK(ncclCommDestroy(world));
  return ended == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED && !lost ? 0 : 5;
}

// Rank 1 arrives 300 ms late: rank 0's GPU time covers the wait, its host time does not.
int late_peer() {
  ncclComm_t world = init_world("world");
  static float data[64];
  if (test_rank() == 1) sleep_ms(300);
  CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, world, nullptr));
  settle(nullptr);
  CHECK(ncclCommDestroy(world));
  return 0;
}

// One call, not inlined: the instruction-count benchmark counts what happens inside it.
__attribute__((noinline)) ncclResult_t bench_one_allreduce(float* data, ncclComm_t comm) {
  return ncclAllReduce(data, data, 1, ncclFloat, ncclSum, comm, nullptr);
}

// Back-to-back all-reduces on the application's own stream, as nccl-tests and XLA issue them,
// waiting for the stream every 64 (as nccl-tests does between sizes; NCCL itself blocks a host
// that runs far ahead): prints the CUDA driver calls this thread made per call in steady state,
// after a warm-up that creates the shim's events and looks the stream up.
int bench_driver_calls(int calls) {
  ncclComm_t world = init_world("world");
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  static float data[16];
  auto run = [&](int n) {
    for (int i = 1; i <= n; ++i) {
      CHECK(ncclAllReduce(data, data, 16, ncclFloat, ncclSum, world, stream));
      if (i % 64 == 0) cuStreamSynchronize(stream);
    }
  };
  run(256);
  sleep_ms(20);  // the shim's collector gives the warm-up's events back
  long before = hostcuda_driver_calls_on_this_thread();
  run(calls);
  long made = hostcuda_driver_calls_on_this_thread() - before;
  std::printf("driver calls per collective: %.4f (%ld in %d calls)\n", static_cast<double>(made) / calls, made, calls);
  settle(stream);
  CHECK(ncclCommDestroy(world));
  return 0;
}

// Rank 1 passes a different count at seq 3 and stops after seq 5; the others go on to seq 8.
int count_mismatch() {
  ncclComm_t world = init_world("world");
  static float data[1024];
  int last = test_rank() == 1 ? 5 : 8;
  for (int seq = 1; seq <= last; ++seq) {
    size_t count = (test_rank() == 1 && seq == 3) ? 512 : 1024;
    CHECK(ncclAllReduce(data, data, count, ncclFloat, ncclSum, world, nullptr));
  }
  sleep_ms(200);  // let the collector see what completed
  return 0;
}

// 20 identical all-reduces on the world comm, one on a side comm every 5 steps; rank 1 skips
// its 7th world all-reduce (the case PyTorch's Flight Recorder reports only as "seq 20").
int skip_interleaved() {
  ncclComm_t world = init_world("world");
  ncclComm_t side = init_world("side");
  static float data[256];
  for (int step = 1; step <= 20; ++step) {
    if (!(test_rank() == 1 && step == 7)) CHECK(ncclAllReduce(data, data, 256, ncclFloat, ncclSum, world, nullptr));
    if (step % 5 == 0) CHECK(ncclAllReduce(data, data, 256, ncclFloat, ncclSum, side, nullptr));
  }
  sleep_ms(200);
  return 0;
}

// The last rank arrives 20 ms late at every collective.
// The last rank sleeps 20 ms before each all-reduce. With `sync`, every rank waits for each op;
// without, the others' hosts run ahead of their streams, as PyTorch's do.
int straggler(bool sync, int ops) {
  ncclComm_t world = init_world("world");
  static float data[256];
  for (int i = 0; i < ops; ++i) {
    if (test_rank() == test_nranks() - 1) sleep_ms(20);
    CHECK(ncclAllReduce(data, data, 256, ncclFloat, ncclSum, world, nullptr));
    if (sync) cuStreamSynchronize(nullptr);
  }
  settle(nullptr);
  CHECK(ncclCommDestroy(world));
  return 0;
}

// A communicator left idle while another works: world all-reduces every 10 ms for `ms`, a split
// runs one all-reduce first and nothing after (held all along, destroyed at the end).
int idle_comm(int ms) {
  ncclComm_t world = init_world("world");
  ncclComm_t side = nullptr;
  CHECK(ncclCommSplit(world, 0, test_rank(), &side, nullptr));
  static float data[256];
  CHECK(ncclAllReduce(data, data, 256, ncclFloat, ncclSum, side, nullptr));
  for (int i = 0; i < ms / 10; ++i) {
    CHECK(ncclAllReduce(data, data, 256, ncclFloat, ncclSum, world, nullptr));
    cuStreamSynchronize(nullptr);
    sleep_ms(10);
  }
  CHECK(ncclCommDestroy(side));
  CHECK(ncclCommDestroy(world));
  return 0;
}

// 40 all-reduces of 1 MiB, then exit at once: no synchronize, no destroy. Their work is still
// running when the process exits.
int exit_in_flight() {
  ncclComm_t world = init_world("world");
  static float data[1 << 18];
  for (int i = 0; i < 40; ++i) CHECK(ncclAllReduce(data, data, 1 << 18, ncclFloat, ncclSum, world, nullptr));
  return 0;
}

// One PreMulSum operator made and destroyed, as PyTorch does around each collective that uses
// one: the instruction-count benchmark counts what happens inside it.
__attribute__((noinline)) ncclResult_t bench_one_premul(ncclComm_t comm) {
  static float scalar = 0.5f;
  ncclRedOp_t op{};
  ncclResult_t result = ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, comm);
  return result == ncclSuccess ? ncclRedOpDestroy(op, comm) : result;
}

// N of them from `depth` frames down, as deep as a Python training step's stack: the call site
// must cost the same however deep the caller is.
__attribute__((noinline)) int bench_premul_at_depth(ncclComm_t world, int n, int depth) {
  if (depth > 0) {
    int failed = bench_premul_at_depth(world, n, depth - 1);
    asm volatile("" ::: "memory");  // not a tail call: each level keeps its frame
    return failed;
  }
  for (int i = 0; i < n; ++i) CHECK(bench_one_premul(world));
  return 0;
}

int bench_premul(int n) {
  ncclComm_t world = init_world("world");
  int failed = bench_premul_at_depth(world, n, 64);
  CHECK(ncclCommDestroy(world));
  return failed;
}

// One graph launch, not inlined: the instruction-count benchmark counts what happens inside it.
__attribute__((noinline)) CUresult bench_one_graph_launch(CUgraphExec exec, CUstream stream) {
  return cuGraphLaunch(exec, stream);
}

// A graph holding one one-element all-reduce, launched N times (a decode loop without its work).
int bench_graph(int n) {
  ncclComm_t world = init_world("world");
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  static float data[1];
  CHECK_CU(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK(ncclAllReduce(data, data, 1, ncclFloat, ncclSum, world, stream));
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  CHECK_CU(cuStreamEndCapture(stream, &graph));
  CHECK_CU(cuGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < n; ++i) CHECK_CU(bench_one_graph_launch(exec, stream));
  settle(stream);
  cuGraphExecDestroy(exec);
  CHECK(ncclCommDestroy(world));
  return 0;
}

// N one-element all-reduces: the instruction-count benchmark runs this under callgrind.
int bench(int n) {
  ncclComm_t world = init_world("world");
  static float data[1];
  for (int i = 0; i < n; ++i) CHECK(bench_one_allreduce(data, world));
  cuStreamSynchronize(nullptr);
  CHECK(ncclCommDestroy(world));
  return 0;
}

// A long run in miniature: `n` all-reduces of two sizes on one stream, a side communicator made
// and destroyed every 100,000 of them; then rank 1 stops while rank 0 issues one more (7 floats)
// that waits for it forever. Each rank marks "soak.<rank>" in the rendezvous folder when it got
// there; the test kills them. (Run with HOSTNCCL_LOCAL_OPS=n: the bulk completes without the stand-in's exchange.)
int soak(long n) {
  int rank = test_rank();
  ncclComm_t world = init_world("world");
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  static float data[256];
  for (long i = 1; i <= n; ++i) {
    CHECK(ncclAllReduce(data, data, i % 2 ? 1 : 256, ncclFloat, ncclSum, world, stream));
    if (i % 100000 == 0) {
      ncclComm_t side = nullptr;
      CHECK(ncclCommSplit(world, 0, rank, &side, nullptr));
      CHECK(ncclCommDestroy(side));
    }
  }
  cuStreamSynchronize(stream);
  if (rank == 0) CHECK(ncclAllReduce(data, data, 7, ncclFloat, ncclSum, world, stream));
  std::string there = std::string(std::getenv("NCCLWATCH_TEST_RENDEZVOUS")) + "/soak." + std::to_string(rank);
  if (FILE* f = std::fopen(there.c_str(), "w")) std::fclose(f);
  for (;;) sleep_ms(1000);
}

// One process driving two ranks of one communicator (ncclCommInitAll), as JAX and CuPy do on
// the GPUs of one host: grouped all-reduces, one stream per rank.
int one_process_two_ranks() {
  ncclComm_t comms[2] = {};
  CHECK(ncclCommInitAll(comms, 2, nullptr));
  CUstream streams[2] = {};
  for (CUstream& s : streams) cuStreamCreate(&s, 0);
  std::vector<float> a(1024, 1.0f), b(1024, 0.0f), c(1024, 0.0f);
  for (int step = 0; step < 3; ++step) {
    CHECK(ncclGroupStart());
    CHECK(ncclAllReduce(a.data(), b.data(), 1024, ncclFloat, ncclSum, comms[0], streams[0]));
    CHECK(ncclAllReduce(a.data(), c.data(), 1024, ncclFloat, ncclSum, comms[1], streams[1]));
    CHECK(ncclGroupEnd());
  }
  for (CUstream s : streams) settle(s);
  for (ncclComm_t comm : comms) CHECK(ncclCommDestroy(comm));
  return 0;
}

// NCCL 2.31's *Config collectives beside the plain ones: rank 0 calls the Config variant where
// the others call the plain one. They are the same collectives: nothing mismatches.
int config_variants() {
  int rank = test_rank(), n = test_nranks();
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  ncclComm_t world = init_world("world");
  std::vector<float> a(64 * n, 1.0f), b(64 * n, 0.0f);
  bool config = rank == 0;
  for (int step = 0; step < 2; ++step) {
    if (config) CHECK(ncclAllReduceConfig(a.data(), b.data(), 64, ncclFloat, ncclSum, world, stream, nullptr));
    else CHECK(ncclAllReduce(a.data(), b.data(), 64, ncclFloat, ncclSum, world, stream));
    if (config) CHECK(ncclAllGatherConfig(a.data(), b.data(), 64, ncclFloat, world, stream, nullptr));
    else CHECK(ncclAllGather(a.data(), b.data(), 64, ncclFloat, world, stream));
    if (config) CHECK(ncclBroadcastConfig(a.data(), b.data(), 64, ncclFloat, 0, world, stream, nullptr));
    else CHECK(ncclBroadcast(a.data(), b.data(), 64, ncclFloat, 0, world, stream));
  }
  settle(stream);
  CHECK(ncclCommDestroy(world));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "mixed") return mixed();
  if (scenario == "set-up-memory") return set_up_memory(argc > 2 ? std::atoi(argv[2]) : 0);
  if (scenario == "suspend-memory") return suspend_memory();
  if (scenario == "idle-comm") return idle_comm(argc > 2 ? std::atoi(argv[2]) : 10000);
  if (scenario == "skip") return skip(argc > 2 ? std::atoi(argv[2]) : 3000);
  if (scenario == "skip-burst") return skip_burst(argc > 2 ? std::atoi(argv[2]) : 3000);
  if (scenario == "shapes") return shapes();
  if (scenario == "newer-api") return newer_api();
  if (scenario == "capture-while-polled") return capture_while_polled();
  if (scenario == "capture") return capture();
  if (scenario == "late-peer") return late_peer();
  if (scenario == "graph-hostile") return graph_hostile();
  if (scenario == "graph-replays")
    return graph_replays(argc > 2 ? std::atoi(argv[2]) : 10, argc > 3 ? std::atoi(argv[3]) : 10,
                         argc > 4 && std::string(argv[4]) == "runtime");
  if (scenario == "soak") return soak(argc > 2 ? std::atol(argv[2]) : 1000000);
  if (scenario == "bench") return bench(argc > 2 ? std::atoi(argv[2]) : 1000);
  if (scenario == "bench-graph") return bench_graph(argc > 2 ? std::atoi(argv[2]) : 1000);
  if (scenario == "bench-premul") return bench_premul(argc > 2 ? std::atoi(argv[2]) : 1000);
  if (scenario == "bench-driver-calls") return bench_driver_calls(argc > 2 ? std::atoi(argv[2]) : 10000);
  if (scenario == "count-mismatch") return count_mismatch();
  if (scenario == "skip-interleaved") return skip_interleaved();
  if (scenario == "straggler") return straggler(true, 10);
  if (scenario == "straggler-async") return straggler(false, 30);
  if (scenario == "straggler-short") return straggler(false, 20);
  if (scenario == "straggler-long") return straggler(true, argc > 2 ? std::atoi(argv[2]) : 1000);
  if (scenario == "one-process-two-ranks") return one_process_two_ranks();
  if (scenario == "config-variants") return config_variants();
  if (scenario == "exit-in-flight") return exit_in_flight();
  std::fprintf(stderr, "usage: collectives_app mixed|skip [ms]|capture|late-peer|bench N\n");
  return 2;
}
