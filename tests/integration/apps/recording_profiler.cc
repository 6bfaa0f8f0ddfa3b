// A profiler plugin of the application's own, for the shim to chain behind (NCCL Inspector's
// stand-in): it asks for the call, plan and kernel-channel events, checks that every parent and
// every handle it is given back is one it made (of the right kind), and at each communicator's
// finalize appends a JSON line of what it saw to $RECORDING_PROFILER_OUT:
//   {"rank": R, "started": {"CollApi": n, ...}, "stopped": {...}, "kernel_stops": n,
//    "bad_parents": n, "bad_handles": n}
// As NCCL's own plugins must, it keeps a plan's handle valid after its stop: the plan's kernel
// channels name it as their parent later.
#include <ncclwatch/nccl_profiler_abi.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace abi = ncclwatch::profiler_abi;

struct Event {
  uint64_t type;
  bool open = true;
};

struct Context {
  int rank = -1;
  std::map<std::string, int> started, stopped;
  int kernel_stops = 0, bad_parents = 0;
  std::vector<std::unique_ptr<Event>> events;
};

std::mutex g_lock;
std::set<const Event*> g_events;            // every handle made, open or not, until its finalize
std::map<const Event*, Context*> g_context;  // and whose it is
int g_bad_handles = 0;                       // handles given back that are not ours, or stopped twice

const char* type_name(uint64_t type) {
  switch (type) {
    case abi::kCollApi: return "CollApi";
    case abi::kP2pApi: return "P2pApi";
    case abi::kColl: return "Coll";
    case abi::kP2p: return "P2p";
    case abi::kKernelCh: return "KernelCh";
    default: return "other";
  }
}

// The kind of event a parent must be: a plan's is its call, a kernel channel's its plan.
uint64_t parent_type(uint64_t type) {
  switch (type) {
    case abi::kColl: return abi::kCollApi;
    case abi::kP2p: return abi::kP2pApi;
    case abi::kKernelCh: return abi::kColl | abi::kP2p;
    default: return 0;
  }
}

ncclResult_t init(void** context, uint64_t, int* mask, const char*, int, int, int rank, abi::DebugLogger) {
  auto* c = new Context;
  c->rank = rank;
  *context = c;
  *mask = abi::kCollApi | abi::kP2pApi | abi::kColl | abi::kP2p | abi::kKernelCh;
  return ncclSuccess;
}

ncclResult_t start_event(void* context, void** handle, abi::EventDescr* e) {
  *handle = nullptr;
  auto* c = static_cast<Context*>(context);
  std::lock_guard<std::mutex> hold(g_lock);
  if (uint64_t want = parent_type(e->type)) {
    auto* parent = static_cast<const Event*>(e->parentObj);
    if (!g_events.count(parent) || !(parent->type & want) || g_context[parent] != c) ++c->bad_parents;
  }
  c->events.push_back(std::make_unique<Event>(Event{e->type}));
  Event* made = c->events.back().get();
  g_events.insert(made);
  g_context[made] = c;
  ++c->started[type_name(e->type)];
  *handle = made;
  return ncclSuccess;
}

Event* own_open(void* handle) {
  auto* e = static_cast<Event*>(handle);
  return g_events.count(e) && e->open ? e : nullptr;
}

ncclResult_t stop_event(void* handle) {
  std::lock_guard<std::mutex> hold(g_lock);
  Event* e = own_open(handle);
  if (!e) {
    ++g_bad_handles;
    return ncclSuccess;
  }
  e->open = false;
  ++g_context[e]->stopped[type_name(e->type)];
  return ncclSuccess;
}

ncclResult_t record_event_state(void* handle, int state, abi::EventStateArgs*) {
  std::lock_guard<std::mutex> hold(g_lock);
  Event* e = own_open(handle);
  if (!e) {
    ++g_bad_handles;
    return ncclSuccess;
  }
  if (state == abi::kKernelChStop && e->type == abi::kKernelCh) ++g_context[e]->kernel_stops;
  return ncclSuccess;
}

std::string counts(const std::map<std::string, int>& m) {
  std::string out = "{";
  for (const auto& [name, n] : m) out += (out.size() > 1 ? ", \"" : "\"") + name + "\": " + std::to_string(n);
  return out + "}";
}

ncclResult_t finalize(void* context) {
  auto* c = static_cast<Context*>(context);
  int bad_handles = 0;
  {
    std::lock_guard<std::mutex> hold(g_lock);
    bad_handles = g_bad_handles;
    for (auto& e : c->events) {
      g_events.erase(e.get());
      g_context.erase(e.get());
    }
  }
  if (const char* out = std::getenv("RECORDING_PROFILER_OUT")) {
    if (FILE* f = std::fopen(out, "a")) {
      std::fprintf(f,
                   "{\"rank\": %d, \"started\": %s, \"stopped\": %s, \"kernel_stops\": %d, \"bad_parents\": %d, "
                   "\"bad_handles\": %d}\n",
                   c->rank, counts(c->started).c_str(), counts(c->stopped).c_str(), c->kernel_stops, c->bad_parents,
                   bad_handles);
      std::fclose(f);
    }
  }
  delete c;
  return ncclSuccess;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const abi::Plugin ncclProfiler_v5 = {
    "recording", init, start_event, stop_event, record_event_state, finalize};
