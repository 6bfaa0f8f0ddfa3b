// A multi-process NCCL program with known lifecycle behaviour, run under the preloaded shim by
// tests/integration/test_lifecycle.py. Each scenario states what a correct report must say.
//   lifecycle_app SCENARIO
#include "check.h"
#include "rendezvous.h"

#include <nccl.h>

#include "resolve/nccl_api.h"  // the device-communicator entry points
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {


ncclComm_t init_world(const char* tag) {
  ncclUniqueId id = rendezvous_unique_id(tag);
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.commName = tag;
  CHECK(ncclCommInitRankConfig(&comm, test_nranks(), id, test_rank(), &config));
  return comm;
}

// Leaks: the world comm, one registration on it, one allocation. Releases: a split (destroyed),
// a second comm (aborted), a freed allocation.
int leaky() {
  ncclComm_t world = init_world("world");
  ncclComm_t half = nullptr;
  CHECK(ncclCommSplit(world, test_rank() % 2, test_rank(), &half, nullptr));
  CHECK(ncclCommDestroy(half));
  ncclComm_t doomed = init_world("doomed");
  CHECK(ncclCommAbort(doomed));

  void* kept = nullptr;
  CHECK(ncclMemAlloc(&kept, 4096));
  void* freed = nullptr;
  CHECK(ncclMemAlloc(&freed, 8192));
  CHECK(ncclMemFree(freed));
  void* handle = nullptr;
  static char buffer[1024];
  CHECK(ncclCommRegister(world, buffer, sizeof(buffer), &handle));
  std::printf("rank %d: leaky done\n", test_rank());
  return 0;
}

// Everything released, in the order a careful program uses.
int clean() {
  ncclComm_t world = init_world("world");
  ncclComm_t half = nullptr;
  CHECK(ncclCommSplit(world, test_rank() % 2, test_rank(), &half, nullptr));
  void* buffer = nullptr;
  CHECK(ncclMemAlloc(&buffer, 4096));
  void* handle = nullptr;
  CHECK(ncclCommRegister(world, buffer, 4096, &handle));
  CHECK(ncclCommDeregister(world, handle));
  CHECK(ncclMemFree(buffer));
  CHECK(ncclCommFinalize(half));
  CHECK(ncclCommDestroy(half));
  CHECK(ncclCommFinalize(world));
  CHECK(ncclCommDestroy(world));
  std::printf("rank %d: clean done\n", test_rank());
  return 0;
}

// Creates a comm, says it is ready, then waits to be killed.
int wait_for_kill() {
  ncclComm_t world = init_world("world");
  ncclComm_t other = init_world("other");
  CHECK(ncclCommDestroy(other));
  (void)world;
  std::string ready = std::string(std::getenv("NCCLWATCH_TEST_RENDEZVOUS")) + "/ready." + std::to_string(test_rank());
  if (FILE* f = std::fopen(ready.c_str(), "w")) std::fclose(f);
  for (;;) pause();
}

void mark(const char* what) {
  std::string path = std::string(std::getenv("NCCLWATCH_TEST_RENDEZVOUS")) + "/" + what + "." + std::to_string(test_rank());
  if (FILE* f = std::fopen(path.c_str(), "w")) std::fclose(f);
}

// The classic init hang: every rank but the last enters the init of "side", the last never
// calls it, so the others wait in it until a signal ends the job.
int init_hangs() {
  ncclComm_t world = init_world("world");
  (void)world;
  if (test_rank() + 1 == test_nranks()) {
    mark("ready");
    for (;;) pause();
  }
  mark("entering");
  init_world("side");
  return 3;  // cannot return: the last rank never joins
}

// 32 threads creating, splitting and destroying one-rank communicators at once.
int threads() {
  constexpr int kThreads = 32, kRounds = 20;
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&] {
      for (int round = 0; round < kRounds; ++round) {
        ncclUniqueId id;
        ncclComm_t comm = nullptr, child = nullptr;
        if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess ||
            ncclCommSplit(comm, 0, 0, &child, nullptr) != ncclSuccess || ncclCommDestroy(child) != ncclSuccess ||
            ncclCommDestroy(comm) != ncclSuccess)
          failures.fetch_add(1);
      }
    });
  }
  for (auto& t : pool) t.join();
  // One deliberate leak, so the test can tell "all released" from "nothing recorded".
  ncclUniqueId id;
  ncclComm_t leaked = nullptr;
  CHECK(ncclGetUniqueId(&id));
  CHECK(ncclCommInitRank(&leaked, 1, id, 0));
  std::printf("threads done, %d failures\n", failures.load());
  return failures.load() ? 4 : 0;
}

// The parent releases its comm; a forked child makes its own and leaks it.
int fork_child_leaks() {
  ncclComm_t world = init_world("world");
  CHECK(ncclCommDestroy(world));
  pid_t child = fork();
  if (child == 0) {
    ncclUniqueId id;
    ncclComm_t mine = nullptr;
    CHECK(ncclGetUniqueId(&id));
    CHECK(ncclCommInitRank(&mine, 1, id, 0));
    std::exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 5;
}

// A destroy that never returns: rank 1 leaves a collective unmatched, so rank 0's destroy waits
// for work that cannot finish; the test kills rank 0 while it is stuck.
// Rank 0 enters a teardown call (ncclCommDestroy, or ncclCommFinalize with `finalize`) that
// never returns: its all-reduce waits for rank 1, which never calls it.
int teardown_hangs(bool finalize) {
  ncclComm_t world = init_world("world");
  if (test_rank() == 0) {
    static float data[16];
    CHECK(ncclAllReduce(data, data, 16, ncclFloat, ncclSum, world, nullptr));
    std::string ready = std::string(std::getenv("NCCLWATCH_TEST_RENDEZVOUS")) + "/ready.0";
    if (FILE* f = std::fopen(ready.c_str(), "w")) std::fclose(f);
    if (finalize) CHECK(ncclCommFinalize(world));  // hangs: the all-reduce never completes
    else CHECK(ncclCommDestroy(world));
    return 0;
  }
  rendezvous_barrier("never");  // rank 1 waits here until the test ends the job
  return 0;
}

// Every resource kind and every end state a program can reach on its own:
// leaks a window and a redop (on a live comm) and the comm itself; releases a device comm,
// a second window, a redop on a destroyed comm; one comm finalized but never destroyed;
// one non-blocking comm destroyed; one init that fails.
int all_resources() {
  ncclComm_t world = init_world("world");
  static char buffers[2][4096];
  ncclWindow_t kept_window = nullptr, freed_window = nullptr;
  CHECK(ncclCommWindowRegister(world, buffers[0], sizeof(buffers[0]), &kept_window, 0));
  CHECK(ncclCommWindowRegister(world, buffers[1], sizeof(buffers[1]), &freed_window, 0));
  CHECK(ncclCommWindowDeregister(world, freed_window));
  float scalar = 2.0f;
  ncclRedOp_t kept_op;
  CHECK(ncclRedOpCreatePreMulSum(&kept_op, &scalar, ncclFloat, ncclScalarHostImmediate, world));
  alignas(64) static char devcomm[4096];
  alignas(64) static char requirements[4096];
  auto* dev = reinterpret_cast<ncclDevComm*>(devcomm);
  CHECK(ncclDevCommCreate(world, reinterpret_cast<const ncclDevCommRequirements*>(requirements), dev));
  CHECK(ncclDevCommDestroy(world, dev));

  ncclComm_t scratch = init_world("scratch");
  ncclRedOp_t scratch_op;
  CHECK(ncclRedOpCreatePreMulSum(&scratch_op, &scalar, ncclFloat, ncclScalarHostImmediate, scratch));
  CHECK(ncclCommDestroy(scratch));  // frees scratch_op with it

  ncclComm_t finalized = init_world("finalized");
  CHECK(ncclCommFinalize(finalized));

  ncclUniqueId id = rendezvous_unique_id("nonblocking");
  ncclComm_t nonblocking = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&nonblocking, test_nranks(), id, test_rank(), &config);
  if (r != ncclSuccess && r != ncclInProgress) return 3;
  do {
    CHECK(ncclCommGetAsyncError(nonblocking, &r));
  } while (r == ncclInProgress);
  CHECK(ncclCommDestroy(nonblocking));

  ncclComm_t failed = nullptr;
  if (ncclCommInitRank(&failed, 0, id, 0) == ncclSuccess) return 3;  // nranks 0: NCCL refuses
  return 0;
}

// Megatron's pattern: model-parallel groups made again each cycle, the old ones dropped without a
// destroy. Three cycles of 4 splits, 1.2 s apart, all from one call site; only the world is
// destroyed. A report must say the 12 piled up, in 3 bursts.
// One call of ncclCommSplit in the program, whatever the compiler unrolls around it.
[[gnu::noinline]] ncclComm_t make_parallel_group(ncclComm_t world, int color) {
  ncclComm_t group = nullptr;
  CHECK(ncclCommSplit(world, color, test_rank(), &group, nullptr));
  return group;
}

void make_parallel_groups(ncclComm_t world, std::vector<ncclComm_t>& groups) {
  for (int g = 0; g < 4; ++g) groups.push_back(make_parallel_group(world, g));
}

// `variant`: "" drops the groups; "destroyed-at-end" destroys all 12 only after the last cycle
// (still piling up while it ran); "replaced" destroys each cycle's groups before the next (no
// pile-up: never more than 4 alive).
int pile_up(const std::string& variant) {
  ncclComm_t world = init_world("world");
  std::vector<ncclComm_t> groups;
  for (int cycle = 0; cycle < 3; ++cycle) {
    if (cycle) std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    if (variant == "replaced") {
      for (ncclComm_t g : groups) CHECK(ncclCommDestroy(g));
      groups.clear();
    }
    make_parallel_groups(world, groups);
  }
  if (variant == "destroyed-at-end" || variant == "replaced")
    for (ncclComm_t g : groups) CHECK(ncclCommDestroy(g));
  CHECK(ncclCommDestroy(world));
  return 0;
}

// Resources out of order: one buffer registered twice while the first registration is held, and
// a window still registered when its communicator is destroyed. The "tidy" communicator does
// everything in order and must not be named.
int out_of_order() {
  static char buffers[3][4096];
  ncclComm_t tidy = init_world("tidy");
  void* handle = nullptr;
  CHECK(ncclCommRegister(tidy, buffers[2], sizeof(buffers[2]), &handle));
  CHECK(ncclCommDeregister(tidy, handle));
  CHECK(ncclCommDestroy(tidy));

  ncclComm_t world = init_world("world");
  void* first = nullptr;
  void* second = nullptr;
  CHECK(ncclCommRegister(world, buffers[0], sizeof(buffers[0]), &first));
  CHECK(ncclCommRegister(world, buffers[0], sizeof(buffers[0]), &second));
  CHECK(ncclCommDeregister(world, second));
  CHECK(ncclCommDeregister(world, first));
  ncclWindow_t window = nullptr;
  CHECK(ncclCommWindowRegister(world, buffers[1], sizeof(buffers[1]), &window, 0));
  CHECK(ncclCommDestroy(world));
  return 0;
}

// A communicator of this process alone.
ncclComm_t comm_of_one_rank() {
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  CHECK(ncclGetUniqueId(&id));
  CHECK(ncclCommInitRank(&comm, 1, id, 0));
  return comm;
}

// Runs until a signal ends it, through every moment a signal can land in: communicator init
// and destroy, collectives that grow the trace chunk by chunk, and fork. Says "ready" once the
// first communicator exists, so a signal finds the shim attached.
int churn() {
  static float data[64];
  bool said_ready = false;
  for (unsigned round = 0;; ++round) {
    ncclComm_t comm = comm_of_one_rank();
    if (!said_ready) {
      std::printf("ready\n");
      std::fflush(stdout);
      said_ready = true;
    }
    for (int i = 0; i < 2000; ++i) CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, comm, nullptr));
    if (round % 8 == 7) {
      pid_t child = fork();
      if (child == 0) _exit(0);
      if (child > 0) waitpid(child, nullptr, 0);
    }
    CHECK(ncclCommDestroy(comm));
  }
}

// One communicator of one rank, a few all-reduces, a clean end: the first NCCL call, where the shim
// sets itself up, and a whole life, for a signal to land anywhere in.
int one_comm() {
  static float data[64];
  ncclComm_t comm = comm_of_one_rank();
  for (int i = 0; i < 10; ++i) CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, comm, nullptr));
  CHECK(ncclCommDestroy(comm));
  return 0;
}

// A server's way with signals: once running, it blocks SIGTERM in its threads and reads it from a
// signalfd, then shuts down cleanly (exit 0, "took signal 15"). Launches are timed and live
// metrics written, so the shim's threads are running when the signal comes: the signal stays
// pending for the signalfd only while no thread leaves it unblocked.
int takes_sigterm_from_a_signalfd() {
  static float data[64];
  ncclComm_t comm = comm_of_one_rank();
  for (int i = 0; i < 20; ++i) CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, comm, nullptr));
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  std::printf("ready\n");
  std::fflush(stdout);
  // Busy elsewhere when the signal comes (as a server is): it must wait, pending, for the read.
  sleep(1);
  int fd = signalfd(-1, &term, SFD_CLOEXEC);
  signalfd_siginfo info{};
  if (fd < 0 || read(fd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return 3;
  std::printf("took signal %u\n", info.ssi_signo);
  CHECK(ncclCommDestroy(comm));
  return 0;
}

// Data-parallel halves (even and odd world ranks) left alive; the world destroyed. A report must
// name each half by the world ranks in it, not only by its own ranks (0 and 1 in both).
int halves_leaked() {
  ncclComm_t world = init_world("world");
  ncclComm_t half = nullptr;
  CHECK(ncclCommSplit(world, test_rank() % 2, test_rank(), &half, nullptr));
  CHECK(ncclCommDestroy(world));
  return 0;
}

// One rank's all-reduces for `seconds`, then a clean destroy. The test truncates the trace
// meanwhile: the program must not notice (no SIGBUS), only the shim stops tracing.
int spin(double seconds) {
  static float data[64];
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  CHECK(ncclGetUniqueId(&id));
  CHECK(ncclCommInitRank(&comm, 1, id, 0));
  std::printf("ready\n");
  std::fflush(stdout);
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  unsigned long calls = 0;
  while (std::chrono::steady_clock::now() < end) {
    // Paced: the stand-in's streams run each call's work later, and a backlog would outlast `seconds`.
    for (int i = 0; i < 20; ++i, ++calls) CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, comm, nullptr));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    // New communicators too: lifecycle records go through the writer's other path.
    ncclComm_t side = nullptr;
    CHECK(ncclGetUniqueId(&id));
    CHECK(ncclCommInitRank(&side, 1, id, 0));
    CHECK(ncclCommDestroy(side));
  }
  CHECK(ncclCommDestroy(comm));
  std::printf("spun %lu calls\n", calls);
  return 0;
}

// `count` one-rank communicators made and destroyed, then one made and left alive ("alive"): with
// a small NCCLWATCH_MAX_MB the history is full long before the end.
int many_comms(int count) {
  ncclUniqueId id;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.commName = "x";
  for (int i = 0; i < count; ++i) {
    ncclComm_t comm = nullptr;
    CHECK(ncclGetUniqueId(&id));
    CHECK(ncclCommInitRankConfig(&comm, 1, id, 0, &config));
    CHECK(ncclCommDestroy(comm));
  }
  config.commName = "alive";
  ncclComm_t alive = nullptr;
  CHECK(ncclGetUniqueId(&id));
  CHECK(ncclCommInitRankConfig(&alive, 1, id, 0, &config));
  return 0;
}

// A communicator's whole life inside an exit handler (registered before the first NCCL call, so
// it runs after the shim saw exit begin): made, used, finalized, destroyed. No leak.
void communicator_in_exit_handler() {
  static float data[64];
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.commName = "in_exit_handler";
  CHECK(ncclGetUniqueId(&id));
  CHECK(ncclCommInitRankConfig(&comm, 1, id, 0, &config));
  CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, comm, nullptr));
  CHECK(ncclCommFinalize(comm));
  CHECK(ncclCommDestroy(comm));
}

int exit_handler_makes_a_communicator() {
  std::atexit(communicator_in_exit_handler);
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  CHECK(ncclGetUniqueId(&id));
  CHECK(ncclCommInitRank(&comm, 1, id, 0));
  CHECK(ncclCommDestroy(comm));
  return 0;
}

// `threads` threads make, use and destroy one-rank communicators without pause while the main
// thread calls exit(): at any moment each thread holds at most one, so at most `threads` can be
// alive when the process ends, however many are made during exit.
int threads_run_through_exit(int threads) {
  for (int t = 0; t < threads; ++t) {
    std::thread([] {
      static thread_local float data[64];
      for (;;) {
        ncclUniqueId id;
        ncclComm_t comm = nullptr;
        CHECK(ncclGetUniqueId(&id));
        CHECK(ncclCommInitRank(&comm, 1, id, 0));
        CHECK(ncclAllReduce(data, data, 64, ncclFloat, ncclSum, comm, nullptr));
        CHECK(ncclCommDestroy(comm));
      }
    }).detach();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  std::string scenario = argc > 1 ? argv[1] : "";
  if (scenario == "leaky") return leaky();
  if (scenario == "clean") return clean();
  if (scenario == "wait-for-kill") return wait_for_kill();
  if (scenario == "threads") return threads();
  if (scenario == "fork") return fork_child_leaks();
  if (scenario == "destroy-hangs") return teardown_hangs(false);
  if (scenario == "finalize-hangs") return teardown_hangs(true);
  if (scenario == "all-resources") return all_resources();
  if (scenario == "churn") return churn();
  if (scenario == "one-comm") return one_comm();
  if (scenario == "pile-up") return pile_up(argc > 2 ? argv[2] : "");
  if (scenario == "out-of-order") return out_of_order();
  if (scenario == "signalfd") return takes_sigterm_from_a_signalfd();
  if (scenario == "init-hangs") return init_hangs();
  if (scenario == "halves-leaked") return halves_leaked();
  if (scenario == "spin") return spin(argc > 2 ? std::atof(argv[2]) : 3.0);
  if (scenario == "many-comms") return many_comms(argc > 2 ? std::atoi(argv[2]) : 4000);
  if (scenario == "exit-handler") return exit_handler_makes_a_communicator();
  if (scenario == "exit-threads") return threads_run_through_exit(argc > 2 ? std::atoi(argv[2]) : 4);
  std::fprintf(stderr, "usage: lifecycle_app leaky|clean|wait-for-kill|threads|fork|destroy-hangs|finalize-hangs|all-resources|churn|one-comm|signalfd|init-hangs|halves-leaked|spin|many-comms|exit-handler|exit-threads\n");
  return 2;
}
