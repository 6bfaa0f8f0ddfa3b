// The shim's cost per call, measured in one process on the same communicators: blocks of calls
// to NCCL's own entry point (pncclAllReduce, NCCL's profiling alias, which no interposer
// replaces) alternate with blocks through ncclAllReduce (the shim's wrapper when it is preloaded).
// Timings between processes vary by more than the shim costs (8 B medians of 11.8-20.0 us from
// one run of nccl-tests to the next), so only a side-by-side comparison shows the difference.
//
//   ab_overhead ranks     two processes, one GPU each (as torchrun runs a job)
//   ab_overhead group     one process driving both GPUs, each call inside a group (nccl-tests -g 2)
//   ab_overhead single    one process, one GPU, a communicator of one rank (launch path only)
//   ab_overhead shared    two processes sharing GPU 0, each with its own NCCL_HOSTID (NCCL then
//                         goes over sockets): a real two-rank launch, plan and kernel on one GPU
//
// Per size (8 B, 1 MiB, 128 MiB) and per round: a block of K calls each way (order alternating),
// timed on the host from the first call until the stream is done ("complete"), and until the
// last call returned ("issue"). Prints, per size, the median per-call time of each way and the
// added microseconds per call with their 25th-75th percentile spread over rounds.
// Build: nvcc -O2 -o ab_overhead ab_overhead.cc -lnccl (any C++17 compiler with CUDA's headers).
#include "cuda_check.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

extern "C" ncclResult_t pncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                       cudaStream_t);

namespace {

using AllReduce = ncclResult_t (*)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, cudaStream_t);

struct Rank {
  ncclComm_t comm;
  cudaStream_t stream;
  float* buf;
  int device;
};

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// K calls on every rank this process drives; returns {issue, complete} microseconds per call.
std::pair<double, double> block(AllReduce fn, std::vector<Rank>& ranks, size_t count, int calls) {
  double t0 = now_us();
  for (int i = 0; i < calls; ++i) {
    if (ranks.size() > 1) CK(ncclGroupStart());
    for (Rank& r : ranks) CK(fn(r.buf, r.buf, count, ncclFloat, ncclSum, r.comm, r.stream));
    if (ranks.size() > 1) CK(ncclGroupEnd());
  }
  double t1 = now_us();
  for (Rank& r : ranks) {
    CK(cudaSetDevice(r.device));
    CK(cudaStreamSynchronize(r.stream));
  }
  double t2 = now_us();
  return {(t1 - t0) / calls, (t2 - t0) / calls};
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  double at = p * (v.size() - 1);
  size_t lo = static_cast<size_t>(at);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - lo);
}

void measure(std::vector<Rank>& ranks, bool print) {
  struct Size {
    size_t bytes;
    int calls;
  };
  const Size sizes[] = {{8, 400}, {1 << 20, 200}, {size_t{128} << 20, 20}};
  const int rounds = 40;
  for (const Size& s : sizes) {
    size_t count = std::max<size_t>(1, s.bytes / sizeof(float));
    block(pncclAllReduce, ranks, count, s.calls);  // warm-up: connections, the shim's events
    block(ncclAllReduce, ranks, count, s.calls);
    std::vector<double> real_issue, real_done, shim_issue, shim_done, added_issue, added_done;
    for (int round = 0; round < rounds; ++round) {
      std::pair<double, double> a, b;
      if (round % 2 == 0) {
        a = block(pncclAllReduce, ranks, count, s.calls);
        b = block(ncclAllReduce, ranks, count, s.calls);
      } else {
        b = block(ncclAllReduce, ranks, count, s.calls);
        a = block(pncclAllReduce, ranks, count, s.calls);
      }
      real_issue.push_back(a.first);
      real_done.push_back(a.second);
      shim_issue.push_back(b.first);
      shim_done.push_back(b.second);
      added_issue.push_back(b.first - a.first);
      added_done.push_back(b.second - a.second);
    }
    if (!print) continue;
    std::printf("size %zu B: complete %.2f us/call direct, %.2f through ncclAllReduce: added %+.3f us "
                "(p25..p75 %+.3f..%+.3f); issue %.2f vs %.2f: added %+.3f us (p25..p75 %+.3f..%+.3f); "
                "%d rounds of %d calls\n",
                s.bytes, percentile(real_done, 0.5), percentile(shim_done, 0.5), percentile(added_done, 0.5),
                percentile(added_done, 0.25), percentile(added_done, 0.75), percentile(real_issue, 0.5),
                percentile(shim_issue, 0.5), percentile(added_issue, 0.5), percentile(added_issue, 0.25),
                percentile(added_issue, 0.75), rounds, s.calls);
    std::fflush(stdout);
  }
}

Rank make_rank(int device, ncclComm_t comm) {
  Rank r{comm, nullptr, nullptr, device};
  CK(cudaSetDevice(device));
  CK(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  CK(cudaMalloc(&r.buf, size_t{128} << 20));
  CK(cudaMemset(r.buf, 0, size_t{128} << 20));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "ranks";
  if (std::string_view(mode) == "group" || std::string_view(mode) == "single") {
    int n = std::string_view(mode) == "group" ? 2 : 1;
    int ngpus = 0;
    CK(cudaGetDeviceCount(&ngpus));
    if (ngpus < n) {
      std::printf("SKIP: needs %d GPUs\n", n);
      return 0;
    }
    ncclComm_t comms[2];
    int devices[2] = {0, 1};
    CK(ncclCommInitAll(comms, n, devices));
    std::vector<Rank> ranks;
    for (int i = 0; i < n; ++i) ranks.push_back(make_rank(i, comms[i]));
    std::printf(n == 2 ? "one process, 2 GPUs, each call a group of 2:\n" : "one process, one GPU, a 1-rank communicator:\n");
    measure(ranks, true);
    for (Rank& r : ranks) CK(ncclCommDestroy(r.comm));
    return 0;
  }
  // Two processes, one GPU each (or both on GPU 0): fork before anything touches CUDA, then rank 0
  // makes the id and hands it over through a pipe.
  bool shared = std::string_view(mode) == "shared";
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return 2;
  std::fflush(stdout);
  pid_t child = fork();
  int rank = child == 0 ? 1 : 0;
  if (shared) setenv("NCCL_HOSTID", rank ? "ab-overhead-1" : "ab-overhead-0", 1);
  ncclUniqueId id;
  if (rank == 0) {
    CK(ncclGetUniqueId(&id));
    if (write(pipe_fds[1], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) return 2;
  } else if (read(pipe_fds[0], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) {
    std::_Exit(2);
  }
  CK(cudaSetDevice(shared ? 0 : rank));
  ncclComm_t comm;
  CK(ncclCommInitRank(&comm, 2, id, rank));
  std::vector<Rank> ranks = {make_rank(rank, comm)};
  if (rank == 0)
    std::printf(shared ? "two processes sharing GPU 0 (rank 0's figures):\n" : "two processes, one GPU each (rank 0's figures):\n");
  measure(ranks, rank == 0);
  CK(ncclCommDestroy(comm));
  if (child == 0) std::_Exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
