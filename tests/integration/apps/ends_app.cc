// One-rank NCCL programs whose signal handling and ending the shim must leave exactly as they are
// without it (tests/integration/test_ends.py runs each with and without the shim).
//   ends_app SCENARIO [ARG]
#include "check.h"
#include "hostcuda.h"

#include <nccl.h>

#include <cuda.h>
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

std::atomic<int> g_handled{0};
void count_signal(int) { g_handled.fetch_add(1); }

float* op_buffer();

ncclComm_t one_rank_comm() {
  op_buffer();  // a current context first, as a real driver needs
  ncclUniqueId id;
  CHECK(ncclGetUniqueId(&id));
  ncclComm_t comm = nullptr;
  CHECK(ncclCommInitRank(&comm, 1, id, 0));
  return comm;
}

// 4 KiB the all-reduces work on: GPU memory under a real driver (the program then runs on a GPU
// with the real NCCL), host memory under the stand-in, which has no cuMemAlloc.
float* op_buffer() {
  static float* buffer = [] {
    cuInit(0);
    CUdevice device = 0;
    CUcontext context = nullptr;
    cuDeviceGet(&device, 0);
    cuDevicePrimaryCtxRetain(&context, device);
    cuCtxSetCurrent(context);
    using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
    CUdeviceptr on_device = 0;
    if (auto alloc = reinterpret_cast<AllocFn>(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2")); alloc && alloc(&on_device, 4096) == CUDA_SUCCESS)
      return reinterpret_cast<float*>(on_device);
    static float on_host[1024];
    return on_host;
  }();
  return buffer;
}

// A few all-reduces on a stream, finished on the device before the program goes on.
void all_reduces(ncclComm_t comm, int n) {
  float* data = op_buffer();
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  for (int i = 0; i < n; ++i) CHECK(ncclAllReduce(data, data, 1024, ncclFloat, ncclSum, comm, stream));
  cuStreamSynchronize(stream);
}

void say(const char* text) {
  std::printf("%s\n", text);
  std::fflush(stdout);
}

// A one-shot handler installed before the first NCCL call: the second signal gets the default
// action (death by it), as the kernel would give it.
int one_shot(int sig, bool system_v) {
  if (system_v) {
    sysv_signal(sig, count_signal);
  } else {
    struct sigaction action{};
    action.sa_handler = count_signal;
    action.sa_flags = SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    sigaction(sig, &action, nullptr);
  }
  ncclComm_t comm = one_rank_comm();
  all_reduces(comm, 2);
  kill(getpid(), sig);
  std::printf("handled %d\n", g_handled.load());
  std::fflush(stdout);
  kill(getpid(), sig);  // dies here
  say("survived the second signal");
  return 0;
}

// A one-shot handler installed after the first NCCL call, through the shim's sigaction.
int one_shot_after(int sig) {
  ncclComm_t comm = one_rank_comm();
  all_reduces(comm, 2);
  struct sigaction action{};
  action.sa_handler = count_signal;
  action.sa_flags = SA_RESETHAND;
  sigemptyset(&action.sa_mask);
  sigaction(sig, &action, nullptr);
  struct sigaction seen{};
  sigaction(sig, nullptr, &seen);
  std::printf("query gives the handler: %d\n", seen.sa_handler == count_signal);
  kill(getpid(), sig);
  std::printf("handled %d\n", g_handled.load());
  sigaction(sig, nullptr, &seen);
  std::printf("reset to default: %d\n", seen.sa_handler == SIG_DFL);
  std::fflush(stdout);
  kill(getpid(), sig);
  say("survived the second signal");
  return 0;
}

// SIGBUS ignored before the first NCCL call: a sent one is ignored still.
int ignored_bus() {
  signal(SIGBUS, SIG_IGN);
  ncclComm_t comm = one_rank_comm();
  all_reduces(comm, 2);
  kill(getpid(), SIGBUS);
  struct sigaction seen{};
  sigaction(SIGBUS, nullptr, &seen);
  std::printf("still ignored: %d\n", seen.sa_handler == SIG_IGN);
  CHECK(ncclCommDestroy(comm));
  say("survived");
  return 0;
}

std::string only_trace() {
  const char* dir = std::getenv("NCCLWATCH_DIR");
  DIR* d = dir ? opendir(dir) : nullptr;
  std::string found;
  while (dirent* e = d ? readdir(d) : nullptr)
    if (std::strstr(e->d_name, ".nwt")) found = std::string(dir) + "/" + e->d_name;
  if (d) closedir(d);
  return found;
}

void fatal_bus(int) {
  const char text[] = "the application's SIGBUS handler ran\n";
  ssize_t ignored = write(2, text, sizeof(text) - 1);
  (void)ignored;
  _exit(9);
}

// A SIGBUS handler installed after the shim's; then the trace is truncated under the shim, whose
// next records fault: the shim takes its own fault first, and the job runs on.
int late_bus_handler() {
  ncclComm_t comm = one_rank_comm();
  all_reduces(comm, 1);
  signal(SIGBUS, fatal_bus);
  std::string trace = only_trace();
  if (trace.empty() || truncate(trace.c_str(), 0) != 0) {
    std::fprintf(stderr, "no trace to truncate (NCCLWATCH_DIR unset?)\n");
  }
  all_reduces(comm, 200);
  ncclComm_t other = one_rank_comm();
  CHECK(ncclCommDestroy(other));
  CHECK(ncclCommDestroy(comm));
  say("ran on");
  return 0;
}

// A SIGBUS handler on an alternate stack, reached from a thread whose 64 KiB stack is nearly used up.
std::atomic<bool> g_on_alternate_stack{false};
char* g_alternate_stack = nullptr;
constexpr size_t kAlternateStackBytes = 256 * 1024;

void bus_on_alternate_stack(int) {
  char here;
  g_on_alternate_stack = &here >= g_alternate_stack && &here < g_alternate_stack + kAlternateStackBytes;
}

char* g_stack_low = nullptr;

__attribute__((noinline)) void use_stack_then_raise(int depth) {
  volatile char pad[512];
  pad[0] = static_cast<char>(depth);
  if (reinterpret_cast<char*>(const_cast<char*>(pad)) - g_stack_low > 1024) use_stack_then_raise(depth + 1);
  else raise(SIGBUS);
  pad[1] = pad[0];
}

void* small_stack_thread(void*) {
  stack_t alternate{};
  alternate.ss_sp = g_alternate_stack;
  alternate.ss_size = kAlternateStackBytes;
  sigaltstack(&alternate, nullptr);
  pthread_attr_t attr;
  pthread_getattr_np(pthread_self(), &attr);
  void* low = nullptr;
  size_t size = 0;
  pthread_attr_getstack(&attr, &low, &size);
  pthread_attr_destroy(&attr);
  g_stack_low = static_cast<char*>(low);
  raise(0);  // binds raise() now: a lazy binding near the stack's end would need more than is left
  use_stack_then_raise(0);
  return nullptr;
}

int alternate_stack() {
  g_alternate_stack = static_cast<char*>(std::malloc(kAlternateStackBytes));
  struct sigaction action{};
  action.sa_handler = bus_on_alternate_stack;
  action.sa_flags = SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, nullptr);
  ncclComm_t comm = one_rank_comm();
  all_reduces(comm, 2);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t thread;
  pthread_create(&thread, &attr, small_stack_thread, nullptr);
  pthread_join(thread, nullptr);
  std::printf("recovered on the alternate stack: %d\n", g_on_alternate_stack.load());
  CHECK(ncclCommDestroy(comm));
  return 0;
}

// Ends by _exit(status) with its communicator alive, as multiprocessing workers end.
int end_by_quick_exit(int status) {
  ncclComm_t comm = one_rank_comm();
  all_reduces(comm, 3);
  _exit(status);
}

// A forked worker uses NCCL, then ends by _exit(0); the parent never calls NCCL.
int forked_worker() {
  pid_t child = fork();
  if (child == 0) {
    ncclComm_t comm = one_rank_comm();
    all_reduces(comm, 3);
    CHECK(ncclCommDestroy(comm));
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  std::printf("worker status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}

// Replaces itself by another program (exec), its communicator alive.
int exec_other(const char* how) {
  ncclComm_t comm = one_rank_comm();
  all_reduces(comm, 3);
  std::fflush(stdout);
  if (std::strcmp(how, "failing") == 0) {
    execl("/nonexistent/program", "program", static_cast<char*>(nullptr));
    say("exec failed, going on");
    all_reduces(comm, 2);
    CHECK(ncclCommDestroy(comm));
    return 0;
  }
  execlp("sh", "sh", "-c", "echo replaced by sh", static_cast<char*>(nullptr));
  return 1;
}

// A large allocation after the first NCCL call, under the address-space limit the test sets.
int large_allocation(int mib) {
  ncclComm_t comm = one_rank_comm();
  all_reduces(comm, 2);
  if (mib <= 0) {  // what is left under the limit, after the first NCCL call
    struct rlimit limit{};
    getrlimit(RLIMIT_AS, &limit);
    FILE* f = std::fopen("/proc/self/status", "r");
    char line[256];
    long size_kib = 0;
    while (f && std::fgets(line, sizeof(line), f))
      if (std::sscanf(line, "VmSize: %ld kB", &size_kib) == 1) break;
    if (f) std::fclose(f);
    std::printf("headroom %ld MiB\n", static_cast<long>(limit.rlim_cur >> 20) - size_kib / 1024);
    return 0;
  }
  void* block = std::malloc(static_cast<size_t>(mib) << 20);
  std::printf("allocated %d MiB: %d\n", mib, block != nullptr);
  std::free(block);
  CHECK(ncclCommDestroy(comm));
  return 0;
}

// Keeps a GPU-timed communicator busy for `ms` milliseconds (a watcher may ask for stacks meanwhile).
int busy_for(int ms) {
  ncclComm_t comm = one_rank_comm();
  for (int waited = 0; waited < ms; waited += 50) {
    all_reduces(comm, 1);
    usleep(50 * 1000);
  }
  CHECK(ncclCommDestroy(comm));
  say("done");
  return 0;
}

// Feature probes of driver functions, by global lookup: the answers must be the driver's.
int probe_driver() {
  void* program = dlopen(nullptr, RTLD_NOW);
  for (const char* name : {"cuGraphLaunch", "cuStreamBeginCaptureToGraph", "cuGraphInstantiateWithParams",
                           "cuStreamEndCapture_ptsz", "cuGraphExecUpdate"}) {
    std::printf("%s: default %d, next %d, program %d\n", name, dlsym(RTLD_DEFAULT, name) != nullptr,
                dlsym(RTLD_NEXT, name) != nullptr, dlsym(program, name) != nullptr);
  }
  return 0;
}

long resident_kib() {
  FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && std::fgets(line, sizeof(line), f))
    if (std::sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
  if (f) std::fclose(f);
  return kib;
}

// An XLA-style loop: every step captures the same all-reduce again, updates one executable graph to
// it and launches it. Prints the resident memory after the first tenth of the steps and at the end.
int recapture_every_step(int steps) {
  ncclComm_t comm = one_rank_comm();
  CUstream stream = nullptr;
  cuStreamCreate(&stream, 0);
  static float data[256];
  CUgraphExec exec = nullptr;
  long early_kib = 0;
  for (int step = 0; step < steps; ++step) {
    CUgraph graph = nullptr;
    cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
    CHECK(ncclAllReduce(data, data, 256, ncclFloat, ncclSum, comm, stream));
    cuStreamEndCapture(stream, &graph);
    if (!exec) {
      cuGraphInstantiate(&exec, graph, 0);
    } else {
      CUgraphExecUpdateResultInfo info{};
      cuGraphExecUpdate(exec, graph, &info);
    }
    cuGraphDestroy(graph);
    cuGraphLaunch(exec, stream);
    if (step % 256 == 0) cuStreamSynchronize(stream);
    if (step == steps / 10) early_kib = resident_kib();
  }
  cuStreamSynchronize(stream);
  std::printf("resident growth %ld KiB\n", resident_kib() - early_kib);
  cuGraphExecDestroy(exec);
  CHECK(ncclCommDestroy(comm));
  say("done");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario = argc > 1 ? argv[1] : "";
  const char* arg = argc > 2 ? argv[2] : "";
  if (scenario == "one-shot") return one_shot(std::atoi(arg), false);
  if (scenario == "system-v") return one_shot(std::atoi(arg), true);
  if (scenario == "one-shot-after") return one_shot_after(std::atoi(arg));
  if (scenario == "ignored-bus") return ignored_bus();
  if (scenario == "late-bus-handler") return late_bus_handler();
  if (scenario == "alternate-stack") return alternate_stack();
  if (scenario == "quick-exit") return end_by_quick_exit(std::atoi(arg));
  if (scenario == "forked-worker") return forked_worker();
  if (scenario == "exec") return exec_other(arg);
  if (scenario == "large-allocation") return large_allocation(std::atoi(arg));
  if (scenario == "busy") return busy_for(std::atoi(arg));
  if (scenario == "probe-driver") return probe_driver();
  if (scenario == "recapture") return recapture_every_step(std::atoi(arg));
  std::fprintf(stderr,
               "usage: ends_app one-shot|system-v|one-shot-after SIG | ignored-bus | late-bus-handler | "
               "alternate-stack | quick-exit STATUS | forked-worker | exec ok|failing | large-allocation MIB | busy MS | probe-driver | recapture STEPS\n");
  return 2;
}
