// Communicator creation (init, InitAll, split, shrink) and teardown state.
#include "hostnccl_comm.h"
#include "hostnccl_profiler.h"

#include "hostcuda.h"
#include "hostnccl_ops.h"

#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <thread>
#include <tuple>

namespace hostnccl {

namespace {

// Communicators of this process not yet destroyed or aborted. A process
// exiting without destroying them still counts as done with them, so the
// last rank to go removes their shared memory.
struct Live {
  std::mutex mu;
  std::set<CommState*> comms;
};

Live* g_live = new Live;  // leaked: used at exit

Live& live() { return *g_live; }

// A forked child does not own its parent's communicators: exiting must not
// count it as one of their ranks being done.
void forget_after_fork() { g_live = new Live; }

void detach_all_at_exit() {
  Live& l = live();
  std::set<CommState*> comms;
  {
    std::lock_guard<std::mutex> g(l.mu);
    comms.swap(l.comms);
  }
  for (CommState* c : comms) c->detach();
}

// Registered when the library loads, so that it runs after the exit handlers of everything
// that started later (the shim's among them), as a real driver's teardown comes after them:
// work still queued at exit keeps running until then.
__attribute__((constructor)) void detach_at_exit_once_loaded() {
  atexit(detach_all_at_exit);
  pthread_atfork(nullptr, nullptr, forget_after_fork);
}

}  // namespace

// HOSTNCCL_COMM_MIB: device memory each communicator holds from its init to its destroy (as
// NCCL's buffers do), seen through cuMemGetInfo and ncclCommMemStats; default 0.
long long comm_device_bytes() {
  static const long long bytes = [] {
    const char* env = getenv("HOSTNCCL_COMM_MIB");
    return env && *env ? atoll(env) << 20 : 0ll;
  }();
  return bytes;
}

// HOSTNCCL_SETUP_MIB: device memory each communicator takes at its first op of each kind, held to
// its destroy; default 0.
long long setup_device_bytes() {
  static const long long bytes = [] {
    const char* env = getenv("HOSTNCCL_SETUP_MIB");
    return env && *env ? atoll(env) << 20 : 0ll;
  }();
  return bytes;
}

// HOSTNCCL_SETUP_UNCOUNTED_MIB: more device memory each first op of a kind takes that
// ncclCommMemStats does not count (NCCL 2.29+ counts its memory manager's buffers, not the
// connections' made at first use), held to its destroy; default 0.
long long setup_uncounted_bytes() {
  static const long long bytes = [] {
    const char* env = getenv("HOSTNCCL_SETUP_UNCOUNTED_MIB");
    return env && *env ? atoll(env) << 20 : 0ll;
  }();
  return bytes;
}

CommState::CommState(uint64_t t, int n, int r, int dev)
    : tag(t), nranks(n), rank(r), device(dev), send_seq(size_t(n)), recv_seq(size_t(n)),
      ctl(std::make_unique<Ctl>(t)), device_bytes(comm_device_bytes()), memory_device(hostcuda_current_device()) {
  hostcuda_account_device_memory(memory_device, device_bytes);
  profiler_comm_init(*this);
  std::lock_guard<std::mutex> g(live().mu);
  live().comms.insert(this);
}

CommState::~CommState() {
  profiler_comm_finalize(*this);  // where an abort left it (destroy finalized it already)
  if (!detached.load()) hostcuda_account_device_memory(memory_device, -resident_bytes());
  std::lock_guard<std::mutex> g(live().mu);
  live().comms.erase(this);
}

void CommState::set_up_for(int kind) {
  long long bytes = setup_device_bytes(), uncounted = setup_uncounted_bytes();
  if ((!bytes && !uncounted) || detached.load()) return;
  {
    std::lock_guard<std::mutex> g(mu);
    if (!set_up_kinds.insert(kind).second) return;
    set_up_bytes += bytes;
    uncounted_bytes += uncounted;
  }
  device_bytes += bytes;
  hostcuda_account_device_memory(memory_device, bytes + uncounted);
}

bool CommState::suspend_memory(bool suspend) {
  long long bytes = 0;
  {
    std::lock_guard<std::mutex> g(mu);
    if (suspended == suspend) return false;
    suspended = suspend;
    bytes = set_up_bytes;
  }
  hostcuda_account_device_memory(memory_device, suspend ? -bytes : bytes);
  return true;
}

long long CommState::resident_bytes() {
  std::lock_guard<std::mutex> g(mu);
  return device_bytes.load() + uncounted_bytes - (suspended ? set_up_bytes : 0);
}

void CommState::work_enqueued() {
  std::lock_guard<std::mutex> g(mu);
  ++outstanding;
}

void CommState::work_finished() {
  std::lock_guard<std::mutex> g(mu);
  if (--outstanding == 0) cv.notify_all();
}

void CommState::wait_quiet() {
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return outstanding == 0; });
}

void CommState::detach() {
  {
    std::lock_guard<std::mutex> g(live().mu);
    live().comms.erase(this);
  }
  if (!detached.exchange(true)) {
    ctl->detach(nranks);
    hostcuda_account_device_memory(memory_device, -resident_bytes());  // destroy frees the buffers, as NCCL's does
  }
}

namespace {

std::mutex g_error_mu;
char g_last_error[512];

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t id_key(const ncclUniqueId& id) {
  uint64_t k;
  memcpy(&k, id.internal, sizeof k);
  return k;
}

void mark_ready(CommState& s, ncclResult_t r) {
  std::lock_guard<std::mutex> g(s.mu);
  s.status.store(r);
  s.cv.notify_all();
}

// Waits until every rank of the id has joined.
void join(const std::shared_ptr<CommState>& s) {
  std::string base = shm_prefix(s->tag) + "init";
  Segment mine = Segment::create(base + "-" + std::to_string(s->rank), 0, uint32_t(s->nranks - 1));
  mine.header().rank = s->rank;
  mine.header().aux[0] = getpid();
  std::vector<Segment> segs;
  Wait w = exchange(base, s->rank, s->nranks, std::move(mine), segs, s->aborted);
  if (w == Wait::Stalled) set_last_error("init: peers did not join within HOSTNCCL_STALL_TIMEOUT_SEC");
  mark_ready(*s, w == Wait::Done ? ncclSuccess : w == Wait::Stalled ? ncclSystemError : ncclInvalidUsage);
}

ncclComm_t new_handle(std::shared_ptr<CommState> s) {
  auto* c = new ncclComm;
  c->state = std::move(s);
  return c;
}

bool config_blocking(const ncclConfig_t* config) {
  return !config || config->blocking == NCCL_CONFIG_UNDEF_INT || config->blocking != 0;
}

bool config_valid(const ncclConfig_t* config) {
  return !config || config->magic == 0xcafebeef;
}

void wait_ready(CommState& s) {
  std::unique_lock<std::mutex> l(s.mu);
  s.cv.wait(l, [&] { return s.status.load() != ncclInProgress; });
}

}  // namespace

void set_last_error(const char* fmt, ...) {
  std::lock_guard<std::mutex> g(g_error_mu);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
  va_end(ap);
}

const char* last_error() { return g_last_error; }

CommState* state_of(ncclComm_t comm) {
  if (!comm || comm->magic != ncclComm::kMagic || comm->dead.load()) return nullptr;
  return comm->state.get();
}

void make_unique_id(ncclUniqueId* id) {
  size_t got = 0;
  while (got < sizeof id->internal) {
    ssize_t n = getrandom(id->internal + got, sizeof id->internal - got, 0);
    if (n > 0) got += size_t(n);
  }
  if (id_key(*id) == 0) id->internal[0] = 1;  // 0 is never a valid key
}

// Like NCCL, the stand-in names its version at the first init when NCCL_DEBUG=INFO; the banner
// is also how a copy linked into another object can be recognised (the shim looks for it).
#define HOSTNCCL_STR2(x) #x
#define HOSTNCCL_STR(x) HOSTNCCL_STR2(x)
constexpr char kVersionBanner[] =
    "NCCL version " HOSTNCCL_STR(NCCL_MAJOR) "." HOSTNCCL_STR(NCCL_MINOR) "." HOSTNCCL_STR(NCCL_PATCH) "+hostnccl";

void say_version_once() {
  static bool said = false;
  const char* debug = std::getenv("NCCL_DEBUG");
  if (said || !debug || std::strcmp(debug, "INFO") != 0) return;
  said = true;
  std::fprintf(stderr, "NCCL INFO %s\n", kVersionBanner);
}

ncclResult_t init_rank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                       const ncclConfig_t* config, int device) {
  say_version_once();
  if (!out) {
    set_last_error("CommInitRank: comm is NULL");
    return ncclInvalidArgument;
  }
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    set_last_error("CommInitRank: rank %d / nranks %d invalid", rank, nranks);
    return ncclInvalidArgument;
  }
  if (!config_valid(config)) {
    set_last_error("CommInitRank: config not initialised with NCCL_CONFIG_INITIALIZER");
    return ncclInvalidArgument;
  }
  int ndev = hostcuda_device_count();
  if (device < 0) device = ndev > 0 ? rank % ndev : 0;
  auto s = std::make_shared<CommState>(id_key(id), nranks, rank, device);
  s->blocking = config_blocking(config);
  *out = new_handle(s);
  if (in_group()) {
    // Several ranks initialised from one thread: join in the background,
    // ncclGroupEnd waits.
    std::thread([s] { join(s); }).detach();
    group_defer_init(s);
    return ncclSuccess;
  }
  if (!s->blocking) {
    std::thread([s] { join(s); }).detach();
    return ncclInProgress;
  }
  join(s);
  return s->status.load();
}

ncclResult_t init_all(ncclComm_t* comms, int ndev, const int* devlist) {
  if (!comms || ndev < 1) {
    set_last_error("CommInitAll: invalid arguments");
    return ncclInvalidArgument;
  }
  ncclUniqueId id;
  make_unique_id(&id);
  std::vector<ncclResult_t> results(size_t(ndev), ncclSuccess);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    threads.emplace_back([&, i] {
      results[size_t(i)] = init_rank(&comms[i], ndev, id, i, nullptr, devlist ? devlist[i] : i);
    });
  }
  for (auto& t : threads) t.join();
  for (ncclResult_t r : results)
    if (r != ncclSuccess) return r;
  return ncclSuccess;
}

ncclResult_t split(ncclComm_t comm, int color, int key, ncclComm_t* out, const ncclConfig_t* config) {
  CommState* p = state_of(comm);
  if (!p || !out || (color < 0 && color != NCCL_SPLIT_NOCOLOR) || !config_valid(config)) {
    set_last_error("CommSplit: invalid arguments");
    return ncclInvalidArgument;
  }
  *out = nullptr;
  wait_ready(*p);
  if (p->status.load() != ncclSuccess) return ncclInvalidUsage;
  uint64_t k = ++p->split_seq;
  std::string base = shm_prefix(p->tag) + "split" + std::to_string(k);
  Segment mine = Segment::create(base + "-" + std::to_string(p->rank), 0, uint32_t(p->nranks - 1));
  mine.header().aux[0] = color;
  mine.header().aux[1] = key;
  std::vector<Segment> segs;
  Wait w = exchange(base, p->rank, p->nranks, std::move(mine), segs, p->aborted);
  if (w != Wait::Done) return w == Wait::Stalled ? ncclSystemError : ncclInvalidUsage;
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;

  // New ranks follow (key, parent rank), as in NCCL.
  std::vector<std::tuple<int64_t, int>> members;
  for (int r = 0; r < p->nranks; ++r) {
    const SegHeader& h = segs[size_t(r)].header();
    if (h.aux[0] == color) members.emplace_back(h.aux[1], r);
  }
  std::sort(members.begin(), members.end());
  int me = int(std::find(members.begin(), members.end(), std::make_tuple(int64_t(key), p->rank)) -
               members.begin());
  uint64_t tag = mix(p->tag ^ mix(k) ^ mix(0x5b11700000000000ull + uint64_t(uint32_t(color))));
  auto s = std::make_shared<CommState>(tag, int(members.size()), me, p->device);
  s->blocking = config_blocking(config);
  s->status.store(ncclSuccess);
  *out = new_handle(s);
  return ncclSuccess;
}

ncclResult_t shrink(ncclComm_t comm, const int* exclude, int nexclude, ncclComm_t* out,
                    const ncclConfig_t* config, int flags) {
  CommState* p = state_of(comm);
  if (!p || !out || nexclude < 0 || (nexclude > 0 && !exclude) || !config_valid(config)) {
    set_last_error("CommShrink: invalid arguments");
    return ncclInvalidArgument;
  }
  std::vector<bool> excluded(size_t(p->nranks), false);
  for (int i = 0; i < nexclude; ++i) {
    if (exclude[i] < 0 || exclude[i] >= p->nranks) return ncclInvalidArgument;
    excluded[size_t(exclude[i])] = true;
  }
  if (excluded[size_t(p->rank)]) return ncclInvalidArgument;  // excluded ranks must not call
  *out = nullptr;
  if (flags & NCCL_SHRINK_ABORT) p->aborted.store(true);  // end the parent's pending work
  wait_ready(*p);
  int survivors = 0, me = 0;
  for (int r = 0; r < p->nranks; ++r) {
    if (excluded[size_t(r)]) continue;
    if (r == p->rank) me = survivors;
    ++survivors;
  }
  // Survivors count splits and shrinks alike, so they agree on the name.
  uint64_t k = ++p->split_seq;
  std::string base = shm_prefix(p->tag) + "shrink" + std::to_string(k);
  Segment mine = Segment::create(base + "-" + std::to_string(p->rank), 0, uint32_t(survivors - 1));
  std::vector<Segment> segs;
  std::atomic<bool> never{false};  // the parent may be aborted by NCCL_SHRINK_ABORT
  Wait w = exchange(base, p->rank, p->nranks, std::move(mine), segs, never, &excluded);
  if (w != Wait::Done) return ncclSystemError;
  uint64_t tag = mix(p->tag ^ mix(k) ^ 0x5b41a4c000000000ull);
  auto s = std::make_shared<CommState>(tag, survivors, me, p->device);
  s->blocking = config_blocking(config);
  s->status.store(ncclSuccess);
  *out = new_handle(s);
  return ncclSuccess;
}

}  // namespace hostnccl
