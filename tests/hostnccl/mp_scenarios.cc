// Multi-process behaviour checks of the NCCL stand-in, one scenario per run:
//   mprun.py -n N -- mp_scenarios SCENARIO
// Exits 0 when every check of the scenario held on this rank.
#include "hostcuda.h"
#include "rendezvous.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

int g_failures = 0;

#define EXPECT(cond)                                                                     \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      ++g_failures;                                                                      \
      fprintf(stderr, "rank %d: %s:%d: expected %s\n", test_rank(), __FILE__, __LINE__, #cond); \
    }                                                                                    \
  } while (0)

#define CHECK_NCCL(call)                                                                           \
  do {                                                                                             \
    ncclResult_t r_ = (call);                                                                      \
    if (r_ != ncclSuccess) {                                                                       \
      fprintf(stderr, "rank %d: %s failed: %s\n", test_rank(), #call, ncclGetErrorString(r_));    \
      exit(2);                                                                                     \
    }                                                                                              \
  } while (0)

int rank_, nranks_;

ncclComm_t init_world(const char* tag = "world") {
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, nranks_, rendezvous_unique_id(tag), rank_));
  return comm;
}

CUstream new_stream() {
  CUstream s;
  if (cuStreamCreate(&s, 0) != CUDA_SUCCESS) exit(2);
  return s;
}

void sync(CUstream s) {
  if (cuStreamSynchronize(s) != CUDA_SUCCESS) exit(2);
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Sum over ranks of (rank + 1) * scale.
int rank_sum(int n, int scale) { return scale * n * (n + 1) / 2; }

// ------------------------------------------------------------------- scenarios

// Every rank sends to the next and receives from the previous, in both
// orders inside a group, and send-then-recv outside a group.
void p2p_ring() {
  ncclComm_t comm = init_world();
  CUstream s = new_stream();
  const int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
  const size_t n = 1000;
  for (int variant = 0; variant < 3; ++variant) {
    std::vector<int32_t> out(n), in(n, -1);
    for (size_t i = 0; i < n; ++i) out[i] = int32_t(rank_ * 100000 + variant * 10000 + int(i));
    if (variant == 0) {
      CHECK_NCCL(ncclGroupStart());
      CHECK_NCCL(ncclSend(out.data(), n, ncclInt32, next, comm, s));
      CHECK_NCCL(ncclRecv(in.data(), n, ncclInt32, prev, comm, s));
      CHECK_NCCL(ncclGroupEnd());
    } else if (variant == 1) {
      CHECK_NCCL(ncclGroupStart());
      CHECK_NCCL(ncclRecv(in.data(), n, ncclInt32, prev, comm, s));
      CHECK_NCCL(ncclSend(out.data(), n, ncclInt32, next, comm, s));
      CHECK_NCCL(ncclGroupEnd());
    } else {
      CHECK_NCCL(ncclSend(out.data(), n, ncclInt32, next, comm, s));  // does not wait for the recv
      CHECK_NCCL(ncclRecv(in.data(), n, ncclInt32, prev, comm, s));
    }
    sync(s);
    for (size_t i = 0; i < n; ++i) {
      if (in[i] != int32_t(prev * 100000 + variant * 10000 + int(i))) {
        fprintf(stderr, "rank %d: ring variant %d element %zu = %d\n", rank_, variant, i, in[i]);
        ++g_failures;
        break;
      }
    }
  }
  CHECK_NCCL(ncclCommDestroy(comm));
}

// Ops inside a group are held until the outermost ncclGroupEnd, then run in
// issue order; ops on different streams of one group all complete.
void groups() {
  ncclComm_t comm = init_world();
  CUstream s1 = new_stream(), s2 = new_stream();
  int32_t a = rank_ + 1, b = 10 * (rank_ + 1), ar = 0, br = 0;
  std::vector<int32_t> gathered(size_t(nranks_), -1);
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclAllReduce(&a, &ar, 1, ncclInt32, ncclSum, comm, s1));
  CHECK_NCCL(ncclGroupEnd());  // inner end: still held
  std::this_thread::sleep_for(50ms);
  EXPECT(hostcuda_pending(s1) == 0);
  EXPECT(ar == 0);
  CHECK_NCCL(ncclAllGather(&a, gathered.data(), 1, ncclInt32, comm, s1));
  CHECK_NCCL(ncclAllReduce(&b, &br, 1, ncclInt32, ncclMax, comm, s2));
  CHECK_NCCL(ncclGroupEnd());
  sync(s1);
  sync(s2);
  EXPECT(ar == rank_sum(nranks_, 1));
  EXPECT(br == 10 * nranks_);
  for (int p = 0; p < nranks_; ++p) EXPECT(gathered[size_t(p)] == p + 1);
  CHECK_NCCL(ncclCommDestroy(comm));
}

int32_t allreduce_sum(ncclComm_t comm, CUstream s, int32_t v) {
  int32_t out = 0;
  CHECK_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
  sync(s);
  return out;
}

// Split by parity with reversed keys, then with one rank opting out, then
// everyone in one color: each child works independently of the parent.
void split() {
  ncclComm_t world = init_world();
  CUstream s = new_stream();

  ncclComm_t half = nullptr;
  CHECK_NCCL(ncclCommSplit(world, rank_ % 2, -rank_, &half, nullptr));
  EXPECT(half != nullptr);
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r)
    if (r % 2 == rank_ % 2) members.push_back(r);
  int count = -1, me = -1;
  CHECK_NCCL(ncclCommCount(half, &count));
  CHECK_NCCL(ncclCommUserRank(half, &me));
  EXPECT(count == int(members.size()));
  // key = -rank: the highest parent rank comes first.
  int expected_me = 0;
  for (int r : members) expected_me += r > rank_ ? 1 : 0;
  EXPECT(me == expected_me);
  int expected_sum = 0;
  for (int r : members) expected_sum += r + 1;
  EXPECT(allreduce_sum(half, s, rank_ + 1) == expected_sum);

  ncclComm_t without0 = reinterpret_cast<ncclComm_t>(1);
  CHECK_NCCL(ncclCommSplit(world, rank_ == 0 ? NCCL_SPLIT_NOCOLOR : 7, rank_, &without0, nullptr));
  if (rank_ == 0) {
    EXPECT(without0 == nullptr);
  } else {
    EXPECT(without0 != nullptr);
    CHECK_NCCL(ncclCommCount(without0, &count));
    EXPECT(count == nranks_ - 1);
    CHECK_NCCL(ncclCommUserRank(without0, &me));
    EXPECT(me == rank_ - 1);
    EXPECT(allreduce_sum(without0, s, rank_ + 1) == rank_sum(nranks_, 1) - 1);
  }

  ncclComm_t all = nullptr;
  CHECK_NCCL(ncclCommSplit(world, 0, rank_, &all, nullptr));
  EXPECT(allreduce_sum(all, s, rank_ + 1) == rank_sum(nranks_, 1));
  EXPECT(allreduce_sum(world, s, 2 * (rank_ + 1)) == rank_sum(nranks_, 2));

  CHECK_NCCL(ncclCommDestroy(all));
  if (without0) CHECK_NCCL(ncclCommDestroy(without0));
  CHECK_NCCL(ncclCommDestroy(half));
  CHECK_NCCL(ncclCommDestroy(world));
}

// Non-blocking init returns ncclInProgress and finishes in the background.
void nonblocking_init() {
  ncclUniqueId id = rendezvous_unique_id();
  if (rank_ != 0) std::this_thread::sleep_for(300ms);  // keep rank 0 waiting
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  EXPECT(ncclCommInitRankConfig(&comm, nranks_, id, rank_, &config) == ncclInProgress);
  EXPECT(comm != nullptr);
  ncclResult_t state = ncclInProgress;
  bool saw_in_progress = false;
  auto t0 = Clock::now();
  for (;;) {
    CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
    if (state != ncclInProgress) break;
    saw_in_progress = true;
    if (ms_since(t0) > 20000) break;
    std::this_thread::sleep_for(5ms);
  }
  EXPECT(state == ncclSuccess);
  if (rank_ == 0) EXPECT(saw_in_progress);
  CUstream s = new_stream();
  EXPECT(allreduce_sum(comm, s, rank_ + 1) == rank_sum(nranks_, 1));
  CHECK_NCCL(ncclCommDestroy(comm));
}

// The last rank skips the second allreduce: its peers' host calls return at
// once but their streams stay pending; aborting their comm completes the
// pending work.
void skip_then_abort() {
  ncclComm_t comm = init_world();
  CUstream s = new_stream();
  const bool skipper = rank_ == nranks_ - 1;
  EXPECT(allreduce_sum(comm, s, 1) == nranks_);
  int32_t v = 1, out = 0;
  if (!skipper) {
    auto t0 = Clock::now();
    CHECK_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    EXPECT(ms_since(t0) < 100);
    CUevent after;
    cuEventCreate(&after, 0);
    cuEventRecord(after, s);
    std::this_thread::sleep_for(300ms);  // grace period
    EXPECT(hostcuda_pending(s) > 0);
    EXPECT(cuStreamQuery(s) == CUDA_ERROR_NOT_READY);
    EXPECT(cuEventQuery(after) == CUDA_ERROR_NOT_READY);
    rendezvous_barrier("checked");
    t0 = Clock::now();
    CHECK_NCCL(ncclCommAbort(comm));
    sync(s);
    EXPECT(ms_since(t0) < 2000);
    EXPECT(hostcuda_pending(s) == 0);
    EXPECT(cuEventQuery(after) == CUDA_SUCCESS);
    EXPECT(out == 0);  // aborted: no data moved
  } else {
    rendezvous_barrier("checked");
    CHECK_NCCL(ncclCommDestroy(comm));  // nothing outstanding here
  }
}

// ncclCommDestroy waits for the comm's queued work, so it blocks while a
// peer is late and returns once the peer arrives.
void destroy_waits_for_late_peer() {
  ncclComm_t comm = init_world();
  CUstream s = new_stream();
  const bool late = rank_ == nranks_ - 1;
  int32_t v = rank_ + 1, out = 0;
  if (!late) {
    CHECK_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    std::atomic<bool> destroyed{false};
    std::thread t([&] {
      CHECK_NCCL(ncclCommDestroy(comm));
      destroyed = true;
    });
    std::this_thread::sleep_for(300ms);
    EXPECT(!destroyed.load());
    rendezvous_barrier("destroy-blocked");
    t.join();
    EXPECT(destroyed.load());
    EXPECT(out == rank_sum(nranks_, 1));
  } else {
    rendezvous_barrier("destroy-blocked");
    CHECK_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    sync(s);
    EXPECT(out == rank_sum(nranks_, 1));
    CHECK_NCCL(ncclCommDestroy(comm));
  }
}

// An event recorded after a collective whose peer is late completes only
// when the peer arrives; elapsed time covers the wait.
void event_after_late_peer() {
  ncclComm_t comm = init_world();
  CUstream s = new_stream();
  const bool late = rank_ == nranks_ - 1;
  const int delay_ms = 400;
  int32_t v = 1, out = 0;
  rendezvous_barrier("start");
  if (late) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    CHECK_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    sync(s);
  } else {
    CUevent e0, e1;
    cuEventCreate(&e0, 0);
    cuEventCreate(&e1, 0);
    cuEventRecord(e0, s);
    CHECK_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    cuEventRecord(e1, s);
    std::this_thread::sleep_for(100ms);
    EXPECT(cuEventQuery(e1) == CUDA_ERROR_NOT_READY);
    EXPECT(cuEventSynchronize(e1) == CUDA_SUCCESS);
    EXPECT(cuEventQuery(e1) == CUDA_SUCCESS);
    float ms = 0;
    EXPECT(cuEventElapsedTime(&ms, e0, e1) == CUDA_SUCCESS);
    EXPECT(ms >= delay_ms - 100);
    fprintf(stderr, "rank %d: elapsed %.1f ms for a peer %d ms late\n", rank_, double(ms), delay_ms);
  }
  EXPECT(out == nranks_);
  CHECK_NCCL(ncclCommDestroy(comm));
}

// Collectives enqueued on a capturing stream run only when the graph is
// launched, at every launch, interleaved correctly with ordinary ones.
void capture() {
  ncclComm_t comm = init_world();
  CUstream s = new_stream();
  int32_t v = 0, out = -1;
  CHECK_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));  // before capture
  sync(s);
  EXPECT(out == 0);
  out = -1;
  EXPECT(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
  CHECK_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
  EXPECT(hostcuda_is_capturing(s) == 1);
  CUgraph graph;
  EXPECT(cuStreamEndCapture(s, &graph) == CUDA_SUCCESS);
  std::this_thread::sleep_for(100ms);
  EXPECT(out == -1);
  EXPECT(hostcuda_pending(s) == 0);
  CUgraphExec exec;
  EXPECT(cuGraphInstantiate(&exec, graph, 0) == CUDA_SUCCESS);
  for (int launch = 1; launch <= 3; ++launch) {
    v = launch * (rank_ + 1);
    EXPECT(cuGraphLaunch(exec, s) == CUDA_SUCCESS);
    sync(s);
    EXPECT(out == rank_sum(nranks_, launch));
    EXPECT(allreduce_sum(comm, s, 1) == nranks_);  // ordinary op between launches
  }
  EXPECT(hostcuda_events_recorded_while_capturing() == 0);
  cuGraphExecDestroy(exec);
  cuGraphDestroy(graph);
  CHECK_NCCL(ncclCommDestroy(comm));
}

// With HOSTNCCL_STALL_TIMEOUT_SEC set, an op whose peer never comes is
// abandoned and the comm reports ncclSystemError.
void stall_timeout() {
  ncclComm_t comm = init_world();
  CUstream s = new_stream();
  if (rank_ == 0) {
    int32_t v = 1, out = 0;
    auto t0 = Clock::now();
    CHECK_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    sync(s);
    double ms = ms_since(t0);
    EXPECT(ms >= 400);
    EXPECT(ms < 10000);
    ncclResult_t state = ncclSuccess;
    CHECK_NCCL(ncclCommGetAsyncError(comm, &state));
    EXPECT(state == ncclSystemError);
  }
  rendezvous_barrier("done");
  CHECK_NCCL(ncclCommDestroy(comm));
}

// A rank returns from main while its stream is blocked on a collective the
// peer skipped: the process must still exit (mprun's timeout catches a hang).
void exit_while_blocked() {
  ncclComm_t comm = init_world();
  CUstream s = new_stream();
  if (rank_ == 0) {
    int32_t v = 1, out = 0;
    CHECK_NCCL(ncclAllReduce(&v, &out, 1, ncclInt32, ncclSum, comm, s));
    std::this_thread::sleep_for(100ms);
    EXPECT(hostcuda_pending(s) == 1);
  }
  rendezvous_barrier("leaving");
}

// A child forked by a rank exits without touching NCCL; the parent's comm
// must stay intact: a message sent before the children exit and received
// after must still arrive (it would hang if their exit removed it).
void fork_child_exits() {
  ncclComm_t comm = init_world();
  CUstream s = new_stream();
  EXPECT(allreduce_sum(comm, s, 1) == nranks_);
  const int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
  int32_t out = rank_, in = -1;
  CHECK_NCCL(ncclSend(&out, 1, ncclInt32, next, comm, s));
  sync(s);
  pid_t pid = fork();
  if (pid == 0) exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  rendezvous_barrier("children-gone");
  CHECK_NCCL(ncclRecv(&in, 1, ncclInt32, prev, comm, s));
  sync(s);
  EXPECT(in == prev);
  CHECK_NCCL(ncclCommDestroy(comm));
}

}  // namespace

int main(int argc, char** argv) {
  rank_ = test_rank();
  nranks_ = test_nranks();
  const std::map<std::string, std::function<void()>> scenarios = {
      {"p2p_ring", p2p_ring},
      {"groups", groups},
      {"split", split},
      {"nonblocking_init", nonblocking_init},
      {"skip_then_abort", skip_then_abort},
      {"destroy_waits_for_late_peer", destroy_waits_for_late_peer},
      {"event_after_late_peer", event_after_late_peer},
      {"capture", capture},
      {"stall_timeout", stall_timeout},
      {"exit_while_blocked", exit_while_blocked},
      {"fork_child_exits", fork_child_exits},
  };
  auto it = argc == 2 ? scenarios.find(argv[1]) : scenarios.end();
  if (it == scenarios.end()) {
    fprintf(stderr, "usage: %s SCENARIO (", argv[0]);
    for (const auto& [name, fn] : scenarios) fprintf(stderr, " %s", name.c_str());
    fprintf(stderr, " )\n");
    return 2;
  }
  it->second();
  if (g_failures) fprintf(stderr, "rank %d: %s: %d checks failed\n", rank_, argv[1], g_failures);
  return g_failures ? 1 : 0;
}
