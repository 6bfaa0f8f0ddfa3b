// NCCL inside a CUDA graph, through the CUDA runtime (nvcc links it statically: it reaches the
// driver through cuGetProcAddress, as every CUDA program does).
//
//   graph_replays replays N OUT   two ranks (forked; they share GPU 0, each claiming a host of its
//                                 own through NCCL_HOSTID) capture a 1 MiB all-reduce, instantiate
//                                 the graph and launch it N times, each launch between CUDA events
//                                 of the program's own; rank 0 writes those times (us) to OUT.
//   graph_replays ab ROUNDS       one process, a communicator of one rank: blocks of launches of a
//                                 graph holding an 8 B all-reduce, in turn through cuGraphLaunch
//                                 (the shim's when preloaded), cudaGraphLaunch (the runtime, which
//                                 reaches the shim too) and the driver's own cuGraphLaunch, found in
//                                 libcuda's symbol table; and the same for a graph without NCCL
//                                 ops. Prints the added us per launch against the driver's (median
//                                 over rounds, 25th-75th percentile).
// Build: nvcc -O2 -o graph_replays graph_replays.cc -lnccl
#include "cuda_check.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <nccl.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(p * (v.size() - 1))];
}

cudaGraphExec_t capture(cudaStream_t stream, void* buf, size_t count, ncclComm_t comm) {
  cudaGraph_t graph;
  CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  if (comm) CK(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, stream));
  else CK(cudaMemsetAsync(buf, 0, count * sizeof(float), stream));
  CK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CK(cudaGraphInstantiate(&exec, graph, 0));
  return exec;
}

int rank_main(int rank, int replays, ncclUniqueId id, const char* out) {
  setenv("NCCL_HOSTID", rank ? "graph-rank1" : "graph-rank0", 1);
  CK(cudaSetDevice(0));
  ncclComm_t comm;
  CK(ncclCommInitRank(&comm, 2, id, rank));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  size_t count = 1 << 18;  // 1 MiB of floats
  float* buf;
  CK(cudaMalloc(&buf, count * sizeof(float)));
  for (int i = 0; i < 3; ++i) CK(ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, stream));
  cudaGraphExec_t exec = capture(stream, buf, count, comm);
  std::vector<cudaEvent_t> begin(replays), end(replays);
  for (int i = 0; i < replays; ++i) {
    CK(cudaEventCreate(&begin[i]));
    CK(cudaEventCreate(&end[i]));
  }
  for (int i = 0; i < replays; ++i) {
    CK(cudaEventRecord(begin[i], stream));
    CK(cudaGraphLaunch(exec, stream));
    CK(cudaEventRecord(end[i], stream));
  }
  CK(cudaStreamSynchronize(stream));
  std::vector<double> us;
  for (int i = 0; i < replays; ++i) {
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, begin[i], end[i]));
    us.push_back(ms * 1000.0);
  }
  if (rank == 0) {
    std::ofstream f(out);
    for (double u : us) f << u << "\n";
    std::printf("replays %d, own events: median %.1f us\n", replays, median(us));
  }
  CK(cudaGraphExecDestroy(exec));
  // No ncclCommDestroy: with two ranks on one GPU over sockets, after graph replays, NCCL 2.28.9's
  // teardown hangs with or without the shim (torch_teardown_hang.sh); the exit alert names the
  // communicator as leaked instead.
  return 0;
}

int replays_main(int replays, const char* out) {
  // Fork before anything touches NCCL or CUDA; rank 0 makes the id and hands it over in a pipe.
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return 2;
  std::fflush(stdout);
  std::vector<pid_t> children;
  for (int rank = 0; rank < 2; ++rank) {
    pid_t pid = fork();
    if (pid == 0) {
      ncclUniqueId id;
      if (rank == 0) {
        CK(ncclGetUniqueId(&id));
        if (write(pipe_fds[1], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) std::_Exit(2);
      } else if (read(pipe_fds[0], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) {
        std::_Exit(2);
      }
      std::exit(rank_main(rank, replays, id, out));
    }
    children.push_back(pid);
  }
  int failures = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failures ? 1 : 0;
}

// The driver's own cuGraphLaunch, from libcuda's dynamic symbol table: every lookup through dlsym
// or cuGetProcAddress answers the shim's wrapper while it is preloaded.
using LaunchFn = CUresult (*)(CUgraphExec, CUstream);
LaunchFn driver_graph_launch() {
  struct Found {
    std::string path;
    ElfW(Addr) base = 0;
  } found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* f = static_cast<Found*>(data);
        if (info->dlpi_name && std::strstr(info->dlpi_name, "libcuda.so")) {
          f->path = info->dlpi_name;
          f->base = info->dlpi_addr;
          return 1;
        }
        return 0;
      },
      &found);
  std::ifstream file(found.path, std::ios::binary);
  std::string elf((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (elf.size() < sizeof(ElfW(Ehdr))) return nullptr;
  auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(elf.data());
  auto* sections = reinterpret_cast<const ElfW(Shdr)*>(elf.data() + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sections[i].sh_type != SHT_DYNSYM) continue;
    const ElfW(Shdr)& strtab = sections[sections[i].sh_link];
    auto* syms = reinterpret_cast<const ElfW(Sym)*>(elf.data() + sections[i].sh_offset);
    for (size_t k = 0; k < sections[i].sh_size / sizeof(ElfW(Sym)); ++k)
      if (std::strcmp(elf.data() + strtab.sh_offset + syms[k].st_name, "cuGraphLaunch") == 0 && syms[k].st_value)
        return reinterpret_cast<LaunchFn>(found.base + syms[k].st_value);
  }
  return nullptr;
}

// Seconds per launch of `k` launches issued by `launch` (host time until the stream is done).
template <class Launch> double block(Launch&& launch, cudaStream_t stream, int k) {
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < k; ++i) launch();
  CK(cudaStreamSynchronize(stream));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / k;
}

// Three ways to launch, in rotating order each round: through the CUDA runtime (cudaGraphLaunch,
// which reaches the shim's wrapper through cuGetProcAddress), through `cuGraphLaunch` as the
// process resolves it (the shim's wrapper when preloaded, else the driver's) and through the
// driver's own entry. The shim's cost is the second against the third: the first also carries the
// runtime's own cost, which the shim does not add.
void ab(const char* what, cudaGraphExec_t exec, cudaStream_t stream, LaunchFn driver, LaunchFn entry, int rounds) {
  const int k = 200;
  std::vector<double> by_runtime, by_entry;
  auto cu_exec = reinterpret_cast<CUgraphExec>(exec);
  auto cu_stream = reinterpret_cast<CUstream>(stream);
  for (int round = 0; round < rounds; ++round) {
    double seconds[3] = {};
    for (int i = 0; i < 3; ++i) {
      int way = (round + i) % 3;
      if (way == 0) seconds[0] = block([&] { CK(cudaGraphLaunch(exec, stream)); }, stream, k);
      if (way == 1) seconds[1] = block([&] { CK(entry(cu_exec, cu_stream)); }, stream, k);
      if (way == 2) seconds[2] = block([&] { CK(driver(cu_exec, cu_stream)); }, stream, k);
    }
    by_runtime.push_back((seconds[0] - seconds[2]) * 1e6);
    by_entry.push_back((seconds[1] - seconds[2]) * 1e6);
  }
  std::printf("%s: added %.3f us per launch (25-75%%: %.3f..%.3f) through cuGraphLaunch; through the runtime's "
              "cudaGraphLaunch %.3f us (25-75%%: %.3f..%.3f); over %d rounds of %d launches each way\n",
              what, median(by_entry), percentile(by_entry, 0.25), percentile(by_entry, 0.75), median(by_runtime),
              percentile(by_runtime, 0.25), percentile(by_runtime, 0.75), rounds, k);
}

int ab_main(int rounds) {
  CK(cudaSetDevice(0));
  ncclComm_t comm;
  int device = 0;
  CK(ncclCommInitAll(&comm, 1, &device));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  float* buf;
  CK(cudaMalloc(&buf, 64));
  CK(ncclAllReduce(buf, buf, 2, ncclFloat, ncclSum, comm, stream));
  LaunchFn driver = driver_graph_launch();
  if (!driver) {
    std::printf("cuGraphLaunch not found in libcuda's symbol table\n");
    return 4;
  }
  auto entry = reinterpret_cast<LaunchFn>(dlsym(RTLD_DEFAULT, "cuGraphLaunch"));
  if (!entry) entry = driver;  // libcuda loaded privately and no shim: both ways are the driver's
  cudaGraphExec_t with_nccl = capture(stream, buf, 2, comm);
  cudaGraphExec_t without = capture(stream, buf, 2, nullptr);
  for (int i = 0; i < 100; ++i) CK(cudaGraphLaunch(with_nccl, stream));  // warm up
  ab("graph with an NCCL all-reduce", with_nccl, stream, driver, entry, rounds);
  ab("graph without NCCL ops", without, stream, driver, entry, rounds);
  CK(cudaStreamSynchronize(stream));
  CK(ncclCommDestroy(comm));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "replays" && argc > 3) return replays_main(std::atoi(argv[2]), argv[3]);
  if (mode == "ab") return ab_main(argc > 2 ? std::atoi(argv[2]) : 20);
  std::fprintf(stderr, "usage: graph_replays replays N OUT | ab ROUNDS\n");
  return 2;
}
