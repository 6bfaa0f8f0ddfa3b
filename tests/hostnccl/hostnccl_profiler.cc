// NCCL's side of the profiler-plugin interface, in the stand-in (hostnccl_profiler.h).
#include "hostnccl_profiler.h"

#include "hostnccl_comm.h"
#include "hostnccl_reduce.h"

#include <ncclwatch/nccl_profiler_abi.h>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <time.h>

namespace hostnccl {
namespace {

namespace abi = ncclwatch::profiler_abi;

struct Loaded {
  const abi::Plugin* plugin = nullptr;
  int mask = 0;  // the activation mask the plugin's inits returned (NCCL keeps one, the last)
};

Loaded& loaded() {
  static Loaded l = [] {
    Loaded out;
    const char* name = std::getenv("NCCL_PROFILER_PLUGIN");
    if (name && strcasecmp(name, "none") == 0) return out;
    std::string lib = !name || !*name ? "libnccl-profiler.so"
                      : std::strchr(name, '/') ? name
                                               : "libnccl-profiler-" + std::string(name) + ".so";
    void* handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) return out;
    const char* forced = std::getenv("HOSTNCCL_PROFILER_VERSION");
    int newest = forced ? std::atoi(forced) : 7;
    for (int v = newest; v >= 5 && !out.plugin; --v) {
      std::string table = "ncclProfiler_v" + std::to_string(v);
      out.plugin = static_cast<const abi::Plugin*>(dlsym(handle, table.c_str()));
      if (out.plugin && std::getenv("HOSTNCCL_PROFILER_LOG"))
        std::fprintf(stderr, "hostnccl: profiler plugin %s (v%d) from %s\n", out.plugin->name, v, lib.c_str());
    }
    return out;
  }();
  return l;
}

const char* func_name(Kind k) {
  switch (k) {
    case Kind::AllReduce: return "AllReduce";
    case Kind::Broadcast: return "Broadcast";
    case Kind::Reduce: return "Reduce";
    case Kind::AllGather: return "AllGather";
    case Kind::ReduceScatter: return "ReduceScatter";
    case Kind::AlltoAll: return "AlltoAll";
    case Kind::Gather: return "Gather";
    case Kind::Scatter: return "Scatter";
    case Kind::Send: return "Send";
    case Kind::Recv: return "Recv";
    default: return "Group";
  }
}

bool hostile() {
  static const bool on = std::getenv("HOSTNCCL_PROFILER_HOSTILE") != nullptr;
  return on;
}

// The stand-in's "tuning": trees and LL below 64 KiB, rings and Simple from there, as NCCL often
// picks on one node; NCCL_ALGO / NCCL_PROTO force one, as in NCCL.
const char* chosen(const char* setting, size_t bytes, const char* small, const char* large) {
  if (const char* forced = std::getenv(setting); forced && *forced) return forced;
  return bytes < (64u << 10) ? small : large;
}

}  // namespace

void profiler_comm_init(CommState& s) {
  Loaded& l = loaded();
  if (!l.plugin) return;
  int mask = 0;
  void* context = nullptr;
  if (l.plugin->init(&context, s.tag, &mask, "", 1, s.nranks, s.rank, nullptr) != ncclSuccess) {
    s.profiler_context = nullptr;  // NCCL goes on without the plugin for this communicator
    return;
  }
  s.profiler_context = context;
  l.mask = mask;
}

void profiler_comm_finalize(CommState& s) {
  void* context = std::exchange(s.profiler_context, nullptr);
  if (context) loaded().plugin->finalize(context);
}

void* profiler_api_start(CommState& s, const Op& op, CUstream stream) {
  Loaded& l = loaded();
  bool p2p = op.kind == Kind::Send || op.kind == Kind::Recv;
  if (!l.plugin || !(l.mask & (p2p ? abi::kP2pApi : abi::kCollApi))) return nullptr;
  abi::EventDescr e{};
  e.type = p2p ? abi::kP2pApi : abi::kCollApi;
  e.rank = s.rank;
  if (p2p) {
    e.p2pApi = {func_name(op.kind), op.count, "", stream, false};
  } else {
    e.collApi = {func_name(op.kind), op.count, "", op.root, stream, false};
  }
  void* handle = nullptr;
  // As NCCL does, with the communicator's context, even a null one (its init was declined).
  l.plugin->startEvent(s.profiler_context, &handle, &e);
  return handle;
}

void profiler_api_stop(void* handle) {
  if (handle) loaded().plugin->stopEvent(handle);
}

void profiler_op_planned(Op& op) {
  Loaded& l = loaded();
  bool p2p = op.kind == Kind::Send || op.kind == Kind::Recv;
  if (!l.plugin || !(l.mask & (p2p ? abi::kP2p : abi::kColl))) return;
  CommState& s = *op.comm;
  abi::EventDescr e{};
  e.parentObj = op.profiler_api;
  static std::atomic<unsigned> turn{0};
  if (hostile() && op.profiler_api) e.parentObj = turn++ % 2 ? static_cast<char*>(op.profiler_api) + 1 : static_cast<void*>(&e);
  e.rank = s.rank;
  size_t bytes = op.count * type_size(op.type);
  if (p2p) {
    e.type = abi::kP2p;
    e.p2p.func = func_name(op.kind);
    e.p2p.count = op.count;
    e.p2p.peer = op.root;
    e.p2p.nChannels = op.channels = bytes < (64u << 10) ? 1 : 2;
  } else {
    e.type = abi::kColl;
    e.coll.seqNumber = s.planned[static_cast<int>(op.kind)]++;
    e.coll.func = func_name(op.kind);
    e.coll.count = op.count;
    e.coll.root = op.root;
    e.coll.nChannels = op.channels = bytes < (64u << 10) ? 1 : 4;
    e.coll.nWarps = 8;
    e.coll.algo = chosen("NCCL_ALGO", bytes, "TREE", "RING");
    e.coll.proto = chosen("NCCL_PROTO", bytes, "LL", "SIMPLE");
  }
  void* handle = nullptr;
  l.plugin->startEvent(s.profiler_context, &handle, &e);
  // Stopped once enqueued, as NCCL does; the handle stays the kernel channels' parent.
  if (handle) l.plugin->stopEvent(handle);
  op.profiler_plan = handle;
}

namespace {

uint64_t timer_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
}

// Each channel's KernelCh handle, between begin and end on the worker.
thread_local std::vector<void*> t_channel_events;

long env_ns(const char* name) {
  const char* env = std::getenv(name);
  return env ? std::atol(env) : 0L;
}

void sleep_ns(long ns) {
  if (ns <= 0) return;
  timespec d{ns / 1000000000L, ns % 1000000000L};
  nanosleep(&d, nullptr);
}

// HOSTNCCL_SLOW_RANK=R with HOSTNCCL_PEER_WAIT_NS=N: a ring held up by rank R, as NCCL shows one
// whose proxy is starved: every other rank's receive operations wait N ns on their peer, spread
// over their steps (each rank receives late because its upstream forwards late), R's own do not:
// its proxy takes as long to post them.
long receive_wait_ns(int rank) {
  static const int slow = [] {
    const char* env = std::getenv("HOSTNCCL_SLOW_RANK");
    return env ? std::atoi(env) : -1;
  }();
  static const long wait = env_ns("HOSTNCCL_PEER_WAIT_NS");
  return slow >= 0 && rank != slow ? wait : 0;
}
long posting_ns(int rank) {
  return receive_wait_ns(rank) ? 0 : receive_wait_ns(rank == 0 ? 1 : 0);
}

// HOSTNCCL_LINK_GBPS=G: sends move G GB/s (a step's bytes take bytes/G ns in SendWait), and an op's
// first send step waits three times as long for the GPU first (its kernel queued behind others), as
// NCCL's do.
long transfer_ns(size_t bytes) {
  static const double gbps = [] {
    const char* env = std::getenv("HOSTNCCL_LINK_GBPS");
    return env ? std::atof(env) : 0.0;
  }();
  return gbps > 0 ? long(double(bytes) / gbps) : 0;
}

// One proxy operation to or from `peer` on a channel, as NCCL's network proxy reports it: its steps
// through their states (nccl_profiler_abi.h EventState), each carrying its share of the bytes.
void proxy_operation(Op& op, void* parent, uint8_t channel, int peer, bool send, size_t bytes) {
  Loaded& l = loaded();
  constexpr size_t kChunk = 128u << 10;
  int nsteps = int(std::min<size_t>(8, std::max<size_t>(1, bytes / kChunk)));
  abi::EventDescr e{};
  e.type = abi::kProxyOp;
  e.parentObj = parent;
  e.rank = op.comm->rank;
  e.proxyOp = {getpid(), channel, peer, nsteps, int(kChunk), send ? 1 : 0};
  void* handle = nullptr;
  l.plugin->startEvent(op.comm->profiler_context, &handle, &e);
  if (!handle) return;
  long wait = send ? 0 : receive_wait_ns(op.comm->rank) / nsteps;
  long posting = send ? 0 : posting_ns(op.comm->rank) / nsteps;
  for (int step = 0; step < nsteps; ++step) {
    abi::EventDescr se{};
    se.type = abi::kProxyStep;
    se.parentObj = handle;
    se.rank = op.comm->rank;
    se.proxyStep.step = step;
    void* sh = nullptr;
    l.plugin->startEvent(op.comm->profiler_context, &sh, &se);
    if (!sh) continue;
    abi::EventStateArgs a{};
    a.proxyStep.transSize = bytes / size_t(nsteps) + (step == 0 ? bytes % size_t(nsteps) : 0);
    auto state = [&](int s) { l.plugin->recordEventState(sh, s, &a); };
    if (send) {
      state(abi::kProxyStepSendGPUWait);
      if (step == 0) sleep_ns(3 * transfer_ns(bytes));
      state(abi::kProxyStepSendPeerWait);
      sleep_ns(wait);
      state(abi::kProxyStepSendWait);
      sleep_ns(transfer_ns(a.proxyStep.transSize));
    } else {
      sleep_ns(posting);
      state(abi::kProxyStepRecvWait);
      sleep_ns(wait);
      state(abi::kProxyStepRecvFlushWait);
      state(abi::kProxyStepRecvGPUWait);
    }
    l.plugin->stopEvent(sh);
  }
  l.plugin->stopEvent(handle);
}

// The op's proxy operations: a send to the ring's next rank and a receive from its previous one
// per channel (a send or receive: to or from its peer), each channel a share of the op's bytes.
void proxy_operations(Op& op, void* parent) {
  CommState& s = *op.comm;
  if (!(loaded().mask & abi::kProxyOp) || s.nranks < 2 || !op.channels) return;
  size_t share = op.count * type_size(op.type) / op.channels;
  for (uint8_t ch = 0; ch < op.channels; ++ch) {
    if (op.kind == Kind::Send || op.kind == Kind::Recv) {
      proxy_operation(op, parent, ch, op.root, op.kind == Kind::Send, share);
      continue;
    }
    proxy_operation(op, parent, ch, (s.rank + 1) % s.nranks, true, share);
    proxy_operation(op, parent, ch, (s.rank + s.nranks - 1) % s.nranks, false, share);
  }
}

}  // namespace

void profiler_kernel_begin(Op& op) {
  Loaded& l = loaded();
  t_channel_events.clear();
  // Hostile: the channels name the call's API event as their parent, a handle of the plugin's
  // that is not the op's plan.
  void* parent = hostile() ? op.profiler_api : op.profiler_plan;
  if (!l.plugin || !parent) return;
  proxy_operations(op, parent);
  if (!(l.mask & abi::kKernelCh)) return;
  uint64_t start = timer_ns();
  for (uint8_t ch = 0; ch < op.channels; ++ch) {
    abi::EventDescr e{};
    e.type = abi::kKernelCh;
    e.parentObj = parent;
    e.rank = op.comm->rank;
    e.kernelCh.channelId = ch;
    e.kernelCh.pTimer = start + ch * 1000u;  // channels start a microsecond apart: the op spans them all
    void* handle = nullptr;
    l.plugin->startEvent(op.comm->profiler_context, &handle, &e);
    t_channel_events.push_back(handle);
  }
  static const long extra_ns = env_ns("HOSTNCCL_KERNEL_NS");
  sleep_ns(extra_ns);
}

void profiler_kernel_end() {
  Loaded& l = loaded();
  if (!l.plugin || t_channel_events.empty()) return;
  uint64_t stop = timer_ns();
  for (void* handle : t_channel_events) {
    if (!handle) continue;
    abi::EventStateArgs a{};
    a.kernelCh.pTimer = stop;
    l.plugin->recordEventState(handle, abi::kKernelChStop, &a);
    l.plugin->stopEvent(handle);
  }
  t_channel_events.clear();
}

}  // namespace hostnccl
