// The shim as NCCL's profiler plugin. NCCL calls it per communicator (init, finalize) and per event:
//   CollApi / P2pApi  started inside the application's ncclAllReduce/ncclSend/... call, on its
//                     thread, so inside our wrapper: its handle is a slot holding the op the wrapper
//                     is issuing (t_thread.issuing);
//   Coll / P2p        started when NCCL plans the launch (the call itself, or ncclGroupEnd), with
//                     the CollApi/P2pApi handle as its parent: what NCCL planned becomes an OpPlan
//                     record of that op.
// Every other event gets no handle (NCCL then calls nothing more for it). Whatever goes wrong here
// answers NCCL with success and stops the plugin, said once: NCCL's work never depends on us.
#include "profiler/profiler_plugin.h"

#include "comms/comms.h"
#include "process/process.h"
#include "resolve/resolve.h"
#include "trace/trace.h"

#include <ncclwatch/nccl_profiler_abi.h>

#include <dlfcn.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

namespace ncclwatch {
namespace {

namespace abi = profiler_abi;

// Set when anything of ours failed: every later event is answered without a look.
std::atomic<bool> g_stopped{false};

// The op behind one CollApi/P2pApi event. NCCL keeps the handle until the op's Coll/P2p event,
// which a group may start long after the call returned: slots are reused round-robin, so an op
// is tied to its plan while fewer than kApiSlots later calls on the communicator came between.
struct ApiSlot {
  uint64_t launch_id = 0;  // 0: none (a call that did not come through a wrapper)
  uint64_t seq = 0;
  uint64_t comm_id = 0;
  uint64_t count = 0;
  int32_t peer = -1;
  int32_t rank = -1;
  int32_t nranks = -1;
  uint16_t api = 0;
  uint8_t datatype = 0;
  bool graph_captured = false;
};

struct Context {
  static constexpr uint32_t kApiSlots = 1024;
  uint64_t comm_hash = 0;
  int rank = -1;
  // Relaxed: a communicator's calls come from one thread at a time (NCCL's rule); the count only
  // spreads the slots.
  std::atomic<uint32_t> next_slot{0};
  ApiSlot slots[kApiSlots];

  // The slot `handle` points at, or null when it is not one of ours (an event NCCL started for a
  // call we did not see, or garbage): never trusted unchecked.
  ApiSlot* slot_of(void* handle) noexcept {
    auto at = reinterpret_cast<uintptr_t>(handle), first = reinterpret_cast<uintptr_t>(slots);
    if (at < first || at >= first + sizeof slots || (at - first) % sizeof(ApiSlot) != 0) return nullptr;
    ApiSlot* p = slots + (at - first) / sizeof(ApiSlot);
    return p->launch_id ? p : nullptr;
  }
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
  r->launch_id = op.launch_id;
  r->seq = op.seq;
  r->comm_id = op.comm_id;
  r->count = op.count;
  r->nccl_seq = nccl_seq;
  r->peer = op.peer;
  r->rank = op.rank;
  r->nranks = op.nranks;
  r->api = op.api;
  r->datatype = op.datatype;
  r->nchannels = nchannels;
  r->nwarps = nwarps;
  copy_name(r->algo, sizeof r->algo, algo);
  copy_name(r->proto, sizeof r->proto, proto);
  r->flags = op.graph_captured ? trace::kPlanGraphCaptured : 0;
  slot.commit(trace::RecordType::kOpPlan);
}

ncclResult_t plugin_init(void** context, uint64_t comm_hash, int* activation_mask, const char*, int, int, int rank,
                         abi::DebugLogger) {
  *context = nullptr;
  // Declined: NCCL goes on without a plugin for this communicator.
  if (!profiler_plugin_armed() || g_stopped.load(std::memory_order_relaxed)) return ncclInvalidUsage;
  try {
    auto* c = new Context;
    c->comm_hash = comm_hash;
    c->rank = rank;
    *context = c;
    *activation_mask = abi::kCollApi | abi::kP2pApi | abi::kColl | abi::kP2p;
    return ncclSuccess;
  } catch (...) {
    stop_plugin("no memory for a communicator's context");
    return ncclInternalError;
  }
}

// The application's call, on its thread, inside our wrapper: the handle is the op it issues.
void* start_api_event(Context& c, const abi::EventDescr& e) noexcept {
  const IssuingOp& op = t_thread.issuing;
  if (!op.launch_id) return nullptr;
  ApiSlot& slot = c.slots[c.next_slot.fetch_add(1, std::memory_order_relaxed) % Context::kApiSlots];
  slot = {op.launch_id, op.seq, op.track ? op.track->id : 0, op.count, op.peer,
          op.track ? op.track->rank : -1, op.track ? op.track->nranks : -1, op.api, op.datatype,
          e.type == abi::kCollApi ? e.collApi.graphCaptured : e.p2pApi.graphCaptured};
  return &slot;
}

ncclResult_t plugin_start_event(void* context, void** handle, abi::EventDescr* e) {
  *handle = nullptr;
  // NCCL starts events on a communicator whose init we declined too: with no context.
  if (!context || !e || g_stopped.load(std::memory_order_relaxed)) return ncclSuccess;
  auto& c = *static_cast<Context*>(context);
  switch (e->type) {
    case abi::kCollApi:
    case abi::kP2pApi: *handle = start_api_event(c, *e); break;
    case abi::kColl:
      if (const ApiSlot* op = c.slot_of(e->parentObj))
        write_plan(*op, e->coll.seqNumber, e->coll.nChannels, e->coll.nWarps, e->coll.algo, e->coll.proto);
      break;
    case abi::kP2p:
      if (const ApiSlot* op = c.slot_of(e->parentObj)) write_plan(*op, 0, e->p2p.nChannels, 0, nullptr, nullptr);
      break;
    default: break;
  }
  return ncclSuccess;
}

ncclResult_t plugin_stop_event(void*) { return ncclSuccess; }

ncclResult_t plugin_record_event_state(void*, int, abi::EventStateArgs*) { return ncclSuccess; }

ncclResult_t plugin_finalize(void* context) {
  delete static_cast<Context*>(context);
  return ncclSuccess;
}

std::string own_path() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&plugin_init), &info) || !info.dli_fname) return {};
  char resolved[PATH_MAX];
  return realpath(info.dli_fname, resolved) ? resolved : "";
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
    if (theirs && self != theirs) {
      std::string text = std::string("ncclwatch: NCCL_PROFILER_PLUGIN=") + theirs +
                         " is the application's: ncclwatch's profiler entry stands aside (no OpPlan records)";
      notice_once(Notice::kProfilerStoodAside, text.c_str());
      return;
    }
    if (self.empty()) {
      notice_once(Notice::kProfilerStoodAside, "ncclwatch: NCCLWATCH_PROFILER: the shim's own path is unknown, "
                                               "so NCCL cannot be pointed at it (no OpPlan records)");
      return;
    }
    // A copy of the shim that NCCL opened by an inherited NCCL_PROFILER_PLUGIN, in a process that
    // does not preload it, is never armed: it declines every communicator.
    detail::g_profiler_plugin_armed.store(true, std::memory_order_relaxed);
    // Before NCCL's first communicator, which reads it: at the first NCCL call, as NCCL's own
    // settings from nccl.conf are set at its first init. Inherited by children, which preload the
    // shim too (else the copy NCCL opens declines: g_armed).
    if (!theirs) setenv("NCCL_PROFILER_PLUGIN", self.c_str(), 0);
  } catch (...) {
    stop_plugin("set-up failed");
  }
}

}  // namespace ncclwatch

// What NCCL looks up in the plugin library: the v6 table first (NCCL >= 2.29), then v5 (2.28).
// The same callbacks: v6's event descriptor is v5's with members added at the union's end.
extern "C" __attribute__((visibility("default"))) const ncclwatch::profiler_abi::Plugin ncclProfiler_v6 = {
    "ncclwatch",       ncclwatch::plugin_init,    ncclwatch::plugin_start_event, ncclwatch::plugin_stop_event,
    ncclwatch::plugin_record_event_state, ncclwatch::plugin_finalize};
extern "C" __attribute__((visibility("default"))) const ncclwatch::profiler_abi::Plugin ncclProfiler_v5 = ncclProfiler_v6;
