// The shim as NCCL's profiler plugin. NCCL calls it per communicator (init, finalize) and per event:
//   CollApi / P2pApi  started inside the application's ncclAllReduce/ncclSend/... call, on its
//                     thread, so inside our wrapper: its handle is a slot holding the op the wrapper
//                     is issuing (t_thread.issuing);
//   Coll / P2p        started when NCCL plans the launch (the call itself, or ncclGroupEnd), with
//                     the CollApi/P2pApi handle as its parent: what NCCL planned becomes an OpPlan
//                     record of that op, and the handle a plan slot for the kernel's channels;
//   KernelCh          started by NCCL's proxy thread when a channel of the op's kernel began, with
//                     the plan slot as its parent and the GPU timer's reading; stopped with the
//                     channel's end: an OpKernel record.
// Every other event gets no handle (NCCL then calls nothing more for it). Whatever goes wrong here
// answers NCCL with success and stops the plugin, said once: NCCL's work never depends on us.
// Where the application named a plugin of its own, it is chained behind this one
// (profiler_chain.h): it gets every event it asks for, and keeps working when ours stops.
#include "profiler/profiler_plugin.h"

#include "profiler/profiler_chain.h"
#include "profiler/profiler_slots.h"
#include "profiler/proxy_steps.h"

#include "comms/comms.h"
#include "process/process.h"
#include "resolve/resolve.h"
#include "trace/trace.h"

#include <ncclwatch/nccl_profiler_abi.h>

#include <dlfcn.h>
#include <sys/statvfs.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>

namespace ncclwatch {
namespace {

namespace abi = profiler_abi;

// Set when anything of ours failed: every later event is answered without a look (but for the
// chained plugin's).
std::atomic<bool> g_stopped{false};

// The application's plugin, chained behind ours: set once at set-up, before NCCL's first
// communicator; every handle NCCL then gets is a HandlePair.
std::atomic<const abi::Plugin*> g_chained{nullptr};

using namespace profiler_slots;

// One channel of an op's kernel between its KernelCh start and stop: NCCL's proxy thread alone
// touches it (the communicator's, one at a time).
struct KernelChannelSlot {
  SlotKind kind = SlotKind::kKernelChannel;
  ApiSlot op;  // launch_id 0: free
  uint64_t gpu_start_ns = 0, gpu_stop_ns = 0;
  uint8_t channel = 0;
};

struct Context {
  static constexpr uint32_t kApiSlots = 1024;
  static constexpr uint32_t kPlanSlots = 1024;    // ops launched whose kernels may not have run yet
  static constexpr uint32_t kChannelSlots = 1024; // kernel channels running at once
  uint64_t comm_hash = 0;
  int rank = -1;
  uint64_t own_mask = 0;  // the events ours asked for
  // The chained plugin's context and mask for this communicator (null: none, or its init failed).
  // The mask is theirs to write through the pointer its init got, so it lives here.
  const abi::Plugin* chained = nullptr;
  void* chained_context = nullptr;
  int chained_mask = 0;
  // Relaxed: a communicator's calls come from one thread at a time (NCCL's rule); the count only
  // spreads the slots.
  std::atomic<uint32_t> next_slot{0};
  std::atomic<uint32_t> next_plan{0};
  std::atomic<uint32_t> next_channel{0};
  ApiSlot slots[kApiSlots];
  PlanSlot plans[kPlanSlots];
  KernelChannelSlot channels[kChannelSlots];
  ProxyOps proxy;  // created only where NCCLWATCH_PROFILER asks for peers

  // The slot `handle` points at, or null when it is not one of ours (an event NCCL started for a
  // call we did not see, or garbage): never trusted unchecked.
  ApiSlot* slot_of(void* handle) noexcept {
    ApiSlot* p = element_at(slots, kApiSlots, handle);
    return p && p->launch_id ? p : nullptr;
  }

  // The same for a KernelCh or ProxyOp event's parent: one of our plan slots, or null.
  PlanSlot* plan_of(void* handle) noexcept { return element_at(plans, kPlanSlots, handle); }
};

void stop_plugin(const char* what) noexcept {
  if (g_stopped.exchange(true)) return;
  std::string text = std::string("ncclwatch: the profiler plugin stopped (") + what +
                     "); NCCL runs on unchanged, later ops have no OpPlan records";
  notice_once(Notice::kProfilerStopped, text.c_str());
}

void copy_name(char* to, size_t capacity, const char* from) noexcept {
  if (!from) return;
  size_t n = strnlen(from, capacity - 1);
  std::memcpy(to, from, n);
}

void write_plan(const ApiSlot& op, uint64_t nccl_seq, uint8_t nchannels, uint8_t nwarps, const char* algo,
                const char* proto) noexcept {
  RecordSlot slot = reserve_record(sizeof(trace::OpPlanRecord));
  if (!slot) return;
  auto* r = slot.as<trace::OpPlanRecord>();
  stamp_op(*r, op);
  r->nccl_seq = nccl_seq;
  r->nchannels = nchannels;
  r->nwarps = nwarps;
  copy_name(r->algo, sizeof r->algo, algo);
  copy_name(r->proto, sizeof r->proto, proto);
  r->flags = op.graph_captured ? trace::kPlanGraphCaptured : 0;
  slot.commit(trace::RecordType::kOpPlan);
}

void write_kernel_channel(const KernelChannelSlot& k) noexcept {
  RecordSlot slot = reserve_record(sizeof(trace::OpKernelRecord));
  if (!slot) return;
  auto* r = slot.as<trace::OpKernelRecord>();
  stamp_op(*r, k.op);
  r->gpu_start_ns = k.gpu_start_ns;
  r->gpu_stop_ns = k.gpu_stop_ns;
  r->channel = k.channel;
  r->nchannels = k.op.nchannels;
  slot.commit(trace::RecordType::kOpKernel);
}

ncclResult_t plugin_init(void** context, uint64_t comm_hash, int* activation_mask, const char* comm_name, int nnodes,
                         int nranks, int rank, abi::DebugLogger logger);
int loaded_nccl_version() noexcept;

// A copy of the shim NCCL opened by an inherited NCCL_PROFILER_PLUGIN in a process that does not
// preload it: nothing of ours runs there, but the plugin the application named (a parent process
// chained it, NCCLWATCH_PROFILER_CHAINED) is served all the same. Silent, as the copy is.
const abi::Plugin* chained_in_a_copy_alone() noexcept {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* kept = std::getenv(kChainedPluginVariable);
    if (!kept || !*kept || !handle_pairs().create()) return;
    ChainedPlugin chained = open_chained_plugin(kept, nccl_profiler_interface(loaded_nccl_version()));
    if (chained.table && chained.table->init != &plugin_init) g_chained.store(chained.table, std::memory_order_release);
  });
  return g_chained.load(std::memory_order_acquire);
}

// The chained plugin's init for this communicator, with NCCL's arguments: false when it declines.
bool init_chained(Context& c, const abi::Plugin* theirs, uint64_t comm_hash, const char* comm_name, int nnodes,
                  int nranks, int rank, abi::DebugLogger logger) noexcept {
  if (theirs->init(&c.chained_context, comm_hash, &c.chained_mask, comm_name, nnodes, nranks, rank, logger) !=
      ncclSuccess)
    return false;
  c.chained = theirs;
  return true;
}

ncclResult_t plugin_init(void** context, uint64_t comm_hash, int* activation_mask, const char* comm_name, int nnodes,
                         int nranks, int rank, abi::DebugLogger logger) {
  *context = nullptr;
  bool armed = profiler_plugin_armed();
  const abi::Plugin* theirs = armed ? g_chained.load(std::memory_order_acquire) : chained_in_a_copy_alone();
  bool ours = armed && !g_stopped.load(std::memory_order_relaxed);
  // Declined: NCCL goes on without a plugin for this communicator.
  if (!ours && !theirs) return ncclInvalidUsage;
  Context* c = new (std::nothrow) Context;
  if (!c) {
    stop_plugin("no memory for a communicator's context");
    return ncclInternalError;
  }
  c->comm_hash = comm_hash;
  c->rank = rank;
  if (ours) {
    c->own_mask = abi::kCollApi | abi::kP2pApi | abi::kColl | abi::kP2p;
    if (detail::g_profiler_kernels_armed.load(std::memory_order_relaxed)) c->own_mask |= abi::kKernelCh;
    if (config().profiler_peers && c->proxy.create()) c->own_mask |= abi::kProxyOp | abi::kProxyStep;
  }
  if (theirs && !init_chained(*c, theirs, comm_hash, comm_name, nnodes, nranks, rank, logger) && !ours) {
    delete c;
    return ncclInvalidUsage;
  }
  *context = c;
  *activation_mask = int(c->own_mask | uint64_t(uint32_t(c->chained_mask)));
  return ncclSuccess;
}

// The application's call, on its thread, inside our wrapper: the handle is the op it issues.
void* start_api_event(Context& c, const abi::EventDescr& e) noexcept {
  const IssuingOp& op = t_thread.issuing;
  if (!op.launch_id) return nullptr;
  ApiSlot& slot = c.slots[c.next_slot.fetch_add(1, std::memory_order_relaxed) % Context::kApiSlots];
  slot.launch_id = op.launch_id;
  slot.seq = op.seq;
  slot.comm_id = op.track ? op.track->id : 0;
  slot.count = op.count;
  slot.peer = op.peer;
  slot.rank = op.track ? op.track->rank : -1;
  slot.nranks = op.track ? op.track->nranks : -1;
  slot.api = op.api;
  slot.datatype = op.datatype;
  slot.graph_captured = e.type == abi::kCollApi ? e.collApi.graphCaptured : e.p2pApi.graphCaptured;
  return &slot;
}

// NCCL planned the op: its OpPlan record, and a plan slot for its kernel's channels to name. A
// graph-captured op gets none: its replays would all name the one plan.
void* start_plan_event(Context& c, const ApiSlot& op, uint8_t nchannels) noexcept {
  if (op.graph_captured) return nullptr;
  PlanSlot& plan = c.plans[c.next_plan.fetch_add(1, std::memory_order_relaxed) % Context::kPlanSlots];
  ApiSlot copy = op;
  copy.nchannels = nchannels;
  plan.store(copy);
  return &plan;
}

// A channel of the op's kernel began (NCCL's proxy thread, the GPU timer's reading).
void* start_kernel_channel(Context& c, const abi::EventDescr& e) noexcept {
  const PlanSlot* plan = c.plan_of(e.parentObj);
  ApiSlot op;
  if (!plan || !plan->load(op)) return nullptr;
  KernelChannelSlot& k = c.channels[c.next_channel.fetch_add(1, std::memory_order_relaxed) % Context::kChannelSlots];
  k.op = op;
  k.gpu_start_ns = e.kernelCh.pTimer;
  k.gpu_stop_ns = 0;
  k.channel = e.kernelCh.channelId;
  return &k;
}

// NCCL's proxy thread began moving the op's data to or from a peer on a channel.
void* start_proxy_op(Context& c, const abi::EventDescr& e) noexcept {
  const PlanSlot* plan = c.plan_of(e.parentObj);
  ApiSlot op;
  if (!plan || !plan->load(op)) return nullptr;
  return c.proxy.start_op(op, e.proxyOp);
}

// Our handle for the event, or null: its parent is one of our handles (or null).
void* start_own_event(Context& c, const abi::EventDescr& e) noexcept {
  if (!(e.type & c.own_mask) || g_stopped.load(std::memory_order_relaxed)) return nullptr;
  switch (e.type) {
    case abi::kCollApi:
    case abi::kP2pApi: return start_api_event(c, e);
    case abi::kColl:
      if (const ApiSlot* op = c.slot_of(e.parentObj)) {
        write_plan(*op, e.coll.seqNumber, e.coll.nChannels, e.coll.nWarps, e.coll.algo, e.coll.proto);
        return start_plan_event(c, *op, e.coll.nChannels);
      }
      return nullptr;
    case abi::kP2p:
      if (const ApiSlot* op = c.slot_of(e.parentObj)) {
        write_plan(*op, 0, e.p2p.nChannels, 0, nullptr, nullptr);
        return start_plan_event(c, *op, e.p2p.nChannels);
      }
      return nullptr;
    case abi::kKernelCh: return start_kernel_channel(c, e);
    case abi::kProxyOp: return start_proxy_op(c, e);
    case abi::kProxyStep: return c.proxy.start_step(e.parentObj, e.proxyStep.step);
    default: return nullptr;
  }
}

// With a plugin chained: each side starts the event with its own handle of the parent (NCCL's
// descriptor lent to each in turn), and NCCL gets the pair.
void* start_chained_event(Context& c, abi::EventDescr& e) noexcept {
  void* parent = e.parentObj;
  HandlePair* parent_pair = handle_pairs().pair_of(parent);
  void* theirs = nullptr;
  // A parent that is not a pair was one the chained plugin never got (the pool was full): its
  // children are not handed to it either.
  if ((e.type & uint64_t(uint32_t(c.chained_mask))) && (parent_pair || !parent)) {
    e.parentObj = parent_pair ? parent_pair->theirs : nullptr;
    // As NCCL would: the handle it set, whatever the answer.
    (void)c.chained->startEvent(c.chained_context, &theirs, &e);
  }
  e.parentObj = parent_pair ? parent_pair->ours : parent;
  void* ours = start_own_event(c, e);
  e.parentObj = parent;
  if (!ours && !theirs) return nullptr;
  HandlePair* pair = handle_pairs().take();
  if (!pair) {  // every pair is open: their event ends here, ours goes on alone
    if (theirs) c.chained->stopEvent(theirs);
    notice_once(Notice::kProfilerChainMissedEvents,
                "ncclwatch: the chained profiler plugin missed events: more than 65536 were open at once");
    return ours;
  }
  pair->ours = ours;
  pair->theirs = theirs;
  return pair;
}

ncclResult_t plugin_start_event(void* context, void** handle, abi::EventDescr* e) {
  *handle = nullptr;
  // NCCL starts events on a communicator whose init we declined too: with no context.
  if (!context || !e) return ncclSuccess;
  auto& c = *static_cast<Context*>(context);
  *handle = c.chained ? start_chained_event(c, *e) : start_own_event(c, *e);
  return ncclSuccess;
}

// NCCL hands back only handles we returned: the kind tells which.
SlotKind kind_of(void* handle) noexcept { return handle ? *static_cast<const SlotKind*>(handle) : SlotKind{}; }

void stop_own_event(void* handle) noexcept {
  SlotKind kind = kind_of(handle);
  if (kind == SlotKind::kProxyOp || kind == SlotKind::kProxyStep)
    return stop_proxy_event(handle, !g_stopped.load(std::memory_order_relaxed));
  if (kind != SlotKind::kKernelChannel) return;
  auto& k = *static_cast<KernelChannelSlot*>(handle);
  if (k.op.launch_id && !g_stopped.load(std::memory_order_relaxed)) write_kernel_channel(k);
  k.op.launch_id = 0;
}

ncclResult_t plugin_stop_event(void* handle) {
  if (HandlePair* pair = handle_pairs().pair_of(handle)) {
    if (pair->theirs) g_chained.load(std::memory_order_relaxed)->stopEvent(pair->theirs);
    stop_own_event(pair->ours);
    HandlePairs::give_back(pair);
    return ncclSuccess;
  }
  stop_own_event(handle);
  return ncclSuccess;
}

void record_own_event_state(void* handle, int state, const abi::EventStateArgs* args) noexcept {
  SlotKind kind = kind_of(handle);
  if (kind == SlotKind::kProxyStep) record_proxy_step_state(handle, state, args);
  if (state == abi::kKernelChStop && args && kind == SlotKind::kKernelChannel)
    static_cast<KernelChannelSlot*>(handle)->gpu_stop_ns = args->kernelCh.pTimer;
}

ncclResult_t plugin_record_event_state(void* handle, int state, abi::EventStateArgs* args) {
  if (HandlePair* pair = handle_pairs().pair_of(handle)) {
    if (pair->theirs) g_chained.load(std::memory_order_relaxed)->recordEventState(pair->theirs, state, args);
    record_own_event_state(pair->ours, state, args);
    return ncclSuccess;
  }
  record_own_event_state(handle, state, args);
  return ncclSuccess;
}

ncclResult_t plugin_finalize(void* context) {
  auto* c = static_cast<Context*>(context);
  if (c && c->chained) c->chained->finalize(c->chained_context);
  delete c;
  return ncclSuccess;
}

// The NCCL that opened us, by its ncclGetVersion in the global scope; 0 when there is none (the
// oldest interface, v5, is then asked of the chained plugin: every later NCCL's descriptors keep
// its layout).
int loaded_nccl_version() noexcept {
  using GetVersion = ncclResult_t (*)(int*);
  auto get = reinterpret_cast<GetVersion>(dlsym(RTLD_DEFAULT, "ncclGetVersion"));
  int version = 0;
  return get && get(&version) == ncclSuccess ? version : 0;
}

std::string own_path() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&plugin_init), &info) || !info.dli_fname) return {};
  char resolved[PATH_MAX];
  return realpath(info.dli_fname, resolved) ? resolved : "";
}

// NCCL's kernel-channel events put a proxy op on every launch, from a pool in /dev/shm; where that
// runs out NCCL 2.28-2.30 dereferences a null pool and the job dies (a container's default 64 MiB
// /dev/shm does it; 1 GiB did not). Below this much free space the events are not asked for.
constexpr uint64_t kMinFreeShmForKernelChannels = uint64_t{512} << 20;

void arm_kernel_channels() {
  struct statvfs shm{};
  uint64_t free_bytes = statvfs("/dev/shm", &shm) == 0 ? uint64_t(shm.f_bavail) * shm.f_frsize : 0;
  if (free_bytes < kMinFreeShmForKernelChannels) {
    std::string text = "ncclwatch: NCCLWATCH_PROFILER=kernels: /dev/shm has " + std::to_string(free_bytes >> 20) +
                       " MiB free, under the 512 MiB NCCL's kernel-channel events need (it crashes when its proxy "
                       "pool runs out): plans only, no kernel times";
    notice_once(Notice::kProfilerStoodAside, text.c_str());
    return;
  }
  detail::g_profiler_kernels_armed.store(true, std::memory_order_relaxed);
}

enum class Chain { kChained, kOurs, kStoodAside };

// NCCL_PROFILER_PLUGIN=`theirs` is the application's: NCCL is pointed at us, which hands their
// plugin its events; or, where that cannot be, we stand aside. kOurs: `theirs` is this library by
// another name (a link, a copy already loaded), which must never be chained behind itself.
Chain chain_to(const char* theirs, const std::string& self, int nccl_version) {
  ChainedPlugin chained;
  if (strcasecmp(theirs, "none") == 0) chained.why_not = "it turns NCCL's profiler plugins off";
  else if (self.empty()) chained.why_not = "the shim's own path is unknown";
  else chained = open_chained_plugin(theirs, nccl_profiler_interface(nccl_version));
  if (chained.table && chained.table->init == &plugin_init) return Chain::kOurs;
  if (chained.table && !handle_pairs().create()) {
    chained.table = nullptr;
    chained.why_not = "no memory for the handles";
  }
  if (!chained.table) {
    std::string text = std::string("ncclwatch: NCCL_PROFILER_PLUGIN=") + theirs +
                       " is the application's, and cannot be chained behind ncclwatch's (" + chained.why_not +
                       "): ncclwatch's profiler entry stands aside (no OpPlan records)";
    notice_once(Notice::kProfilerStoodAside, text.c_str());
    return Chain::kStoodAside;
  }
  g_chained.store(chained.table, std::memory_order_release);
  setenv(kChainedPluginVariable, theirs, 1);
  setenv("NCCL_PROFILER_PLUGIN", self.c_str(), 1);
  std::string text = std::string("ncclwatch: NCCL_PROFILER_PLUGIN=") + theirs +
                     " is the application's: NCCL gets ncclwatch's profiler entry, which hands " + chained.library +
                     " (its ncclProfiler_v" + std::to_string(chained.version) + ") every event it asks for";
  notice_once(Notice::kProfilerChained, text.c_str());
  return Chain::kChained;
}

}  // namespace

void set_up_profiler_plugin() noexcept {
  if (!config().profiler) return;
  try {
    const RealNccl* real = real_nccl();
    if (real && real->version && real->version < 22800) {
      std::string text = "ncclwatch: NCCLWATCH_PROFILER asks for NCCL's profiler interface v5, which NCCL " +
                         std::to_string(real->version) + " lacks (2.28 has it): no OpPlan records";
      notice_once(Notice::kProfilerStoodAside, text.c_str());
      return;
    }
    std::string self = own_path();
    const char* theirs = std::getenv("NCCL_PROFILER_PLUGIN");
    // A child of a process that chained: NCCL_PROFILER_PLUGIN names us, the application's is kept aside.
    const char* kept = std::getenv(kChainedPluginVariable);
    if (theirs && self == theirs && kept && *kept) theirs = kept;
    if (theirs && self != theirs) {
      if (chain_to(theirs, self, real ? real->version : 0) == Chain::kStoodAside) return;
    }
    if (self.empty()) {
      notice_once(Notice::kProfilerStoodAside, "ncclwatch: NCCLWATCH_PROFILER: the shim's own path is unknown, "
                                               "so NCCL cannot be pointed at it (no OpPlan records)");
      return;
    }
    // A copy of the shim that NCCL opened by an inherited NCCL_PROFILER_PLUGIN, in a process that
    // does not preload it, is never armed: it declines every communicator.
    detail::g_profiler_plugin_armed.store(true, std::memory_order_relaxed);
    if (config().profiler_kernels) arm_kernel_channels();
    // Before NCCL's first communicator, which reads it: at the first NCCL call, as NCCL's own
    // settings from nccl.conf are set at its first init. Inherited by children, which preload the
    // shim too (else the copy NCCL opens declines: g_armed).
    if (!std::getenv("NCCL_PROFILER_PLUGIN")) setenv("NCCL_PROFILER_PLUGIN", self.c_str(), 0);
  } catch (...) {
    stop_plugin("set-up failed");
  }
}

}  // namespace ncclwatch

// What NCCL looks up in the plugin library, newest first: v7 (NCCL >= 2.31), v6 (2.29), v5 (2.28).
// The same callbacks: each version's descriptors extend the last one's at their ends
// (nccl_profiler_abi.h).
extern "C" __attribute__((visibility("default"))) const ncclwatch::profiler_abi::Plugin ncclProfiler_v7 = {
    "ncclwatch",       ncclwatch::plugin_init,    ncclwatch::plugin_start_event, ncclwatch::plugin_stop_event,
    ncclwatch::plugin_record_event_state, ncclwatch::plugin_finalize};
extern "C" __attribute__((visibility("default"))) const ncclwatch::profiler_abi::Plugin ncclProfiler_v6 = ncclProfiler_v7;
extern "C" __attribute__((visibility("default"))) const ncclwatch::profiler_abi::Plugin ncclProfiler_v5 = ncclProfiler_v7;
