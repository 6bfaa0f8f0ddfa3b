// The CUDA driver entry points that follow NCCL ops into CUDA graphs (resolve/cuda_entry_points.h
// says how programs reach them). Begin/end capture keep count of open captures and tie a capture's
// NCCL ops to its graph; instantiate, update and destroy keep the table of executable graphs that
// hold NCCL ops (graph/graph_table.h); a launch of one of those is a replay: each of its NCCL ops
// gets its communicator's next seq and an op record, and GPU events around the launch time it as
// they time an ungrouped op. Every other call goes straight to the driver: a launch of a graph
// without NCCL ops costs one relaxed load while no exec with NCCL ops is alive, one lookup after.
//
// To add an entry point: a line in NCCLWATCH_CUDA_ENTRIES, its wrapper template below, its case in
// wrapper_of() and entry_for_request(), and its name in libncclwatch.map.
#include "comms/comms.h"
#include "gpu/gpu.h"
#include "graph/graph.h"
#include "process/process.h"
#include "resolve/resolve.h"
#include "trace/trace.h"
#include "wrap/op_record.h"
#include "wrap/recorder.h"

#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <memory>

// cuda.h maps these names to newer versions; the shim exports each exact symbol with its own ABI.
#undef cuStreamBeginCapture
#undef cuGraphInstantiate
#undef cuGraphExecUpdate
#undef cuGetProcAddress

namespace ncclwatch {
namespace {

using trace::Api;

// X(Entry, exported symbol): every interposed driver symbol, each with the ABI the driver gives
// that exact name.
#define NCCLWATCH_CUDA_ENTRIES(X)                                         \
  X(GraphLaunch, "cuGraphLaunch")                                         \
  X(GraphLaunchPtsz, "cuGraphLaunch_ptsz")                                \
  X(BeginCapture, "cuStreamBeginCapture")                                 \
  X(BeginCaptureV2, "cuStreamBeginCapture_v2")                            \
  X(BeginCaptureV2Ptsz, "cuStreamBeginCapture_v2_ptsz")                   \
  X(BeginCaptureToGraph, "cuStreamBeginCaptureToGraph")                   \
  X(BeginCaptureToGraphPtsz, "cuStreamBeginCaptureToGraph_ptsz")          \
  X(EndCapture, "cuStreamEndCapture")                                     \
  X(EndCapturePtsz, "cuStreamEndCapture_ptsz")                            \
  X(Instantiate, "cuGraphInstantiate")                                    \
  X(InstantiateV2, "cuGraphInstantiate_v2")                               \
  X(InstantiateWithFlags, "cuGraphInstantiateWithFlags")                  \
  X(InstantiateWithParams, "cuGraphInstantiateWithParams")                \
  X(InstantiateWithParamsPtsz, "cuGraphInstantiateWithParams_ptsz")       \
  X(ExecUpdate, "cuGraphExecUpdate")                                      \
  X(ExecUpdateV2, "cuGraphExecUpdate_v2")                                 \
  X(GraphDestroy, "cuGraphDestroy")                                       \
  X(ExecDestroy, "cuGraphExecDestroy")                                    \
  X(GetProcAddress, "cuGetProcAddress")                                   \
  X(GetProcAddressV2, "cuGetProcAddress_v2")

enum class Entry : int {
#define NCCLWATCH_ENTRY_ENUM(id, symbol) k##id,
  NCCLWATCH_CUDA_ENTRIES(NCCLWATCH_ENTRY_ENUM)
#undef NCCLWATCH_ENTRY_ENUM
      kCount
};
constexpr int kEntries = static_cast<int>(Entry::kCount);
constexpr const char* kSymbols[] = {
#define NCCLWATCH_ENTRY_SYMBOL(id, symbol) symbol,
    NCCLWATCH_CUDA_ENTRIES(NCCLWATCH_ENTRY_SYMBOL)
#undef NCCLWATCH_ENTRY_SYMBOL
};

// The driver's function behind each entry: stored by whichever lookup handed out the wrapper
// (dlsym, cuGetProcAddress), else found by name on first use (a program linked to libcuda).
std::atomic<void*> g_real[kEntries];

void* find_in_driver(const char* symbol) noexcept {
  void* fn = real_dlsym(RTLD_NEXT, symbol);
  if (fn && !is_inside_shim(fn)) return fn;
  // Loaded in a local scope (by the CUDA runtime, or by a library Python opened): ask it directly.
  static void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  fn = driver ? real_dlsym(driver, symbol) : nullptr;
  return fn && !is_inside_shim(fn) ? fn : nullptr;
}

template <class Fn> Fn real_entry(Entry e) noexcept {
  int i = static_cast<int>(e);
  // Acquire pairs with the release below or in keep_real(): the pointer is the driver's.
  void* fn = g_real[i].load(std::memory_order_acquire);
  if (!fn) [[unlikely]] {
    fn = find_in_driver(kSymbols[i]);
    if (fn) g_real[i].store(fn, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(fn);
}

void keep_real(Entry e, void* fn) noexcept { g_real[static_cast<int>(e)].store(fn, std::memory_order_release); }

// A call whose driver function cannot be found: only possible when libcuda.so.1 is not loaded,
// which a program calling it cannot be.
CUresult no_driver(Entry e) noexcept {
  notice_once(Notice::kGraphsLost, "ncclwatch: a CUDA graph entry point was called but the CUDA driver was not found");
  (void)e;
  return CUDA_ERROR_NOT_FOUND;
}

bool following_graphs() noexcept { return config().record && !another_shim_copy_traces(); }

// ----------------------------------------------------------------------------------- replays

// Past its graph's first replays, a replay is timestamped by the time budget (one per ms of host
// time: every step of a decode loop of 1 ms or more) and otherwise one in 32 x NCCLWATCH_SAMPLE:
// a graph launch costs the host ~2 us, and on an H200 a timed pair of events around a tight loop
// of replays cost ~8 us each (timing 1 replay in 32 added ~0.25 us a launch).
constexpr uint32_t kReplaySampleScale = 32;

uint64_t replay_shape(const GraphOps& graph) {
  return op_shape(Api::kGroupEnd, graph.capture_id, 0xff);  // its own timestamp schedule per graph
}

// Each NCCL op of the graph, as run by this launch: its seq and op record. (Not in the op totals:
// those count calls, and their host times are enqueue times, which a replay has none of.)
struct ReplayedOps {
  uint64_t lead_seq = 0;  // the last collective seq of the first op's comm
};

ReplayedOps record_replayed_ops(const GraphOps& graph, CUstream stream, uint64_t launch_id, int64_t begin_ns,
                                int64_t end_ns, bool timed) {
  ReplayedOps out;
  const CommTrack* lead = graph.ops.front().track;
  for (const CapturedOp& op : graph.ops) {
    uint64_t seq = 0;
    if (op.track) {
      seq = trace::is_point_to_point(op.api) ? op.track->next_p2p_seq(op.peer, op.api == Api::kRecv)
                                             : op.track->issued.fetch_add(1, std::memory_order_relaxed) + 1;
      if (op.track == lead && !trace::is_point_to_point(op.api)) out.lead_seq = seq;
    }
    uint32_t comm_index = comm_ref_index(op.track, op.comm);
    OpArgs args{op.api, reinterpret_cast<ncclComm_t>(op.comm), reinterpret_cast<cudaStream_t>(stream),
                op.count, static_cast<ncclDataType_t>(op.datatype), op.redop, op.peer,
                (op.flags & trace::kOpInPlace) != 0, static_cast<uint16_t>(op.flags & ~trace::kOpInPlace)};
    uint16_t flags = op.flags | trace::kOpReplayed | (timed ? trace::kOpTimed : 0);
    write_op_record(args, comm_index, seq, launch_id, begin_ns, end_ns, ncclSuccess, flags, 0, graph.index);
  }
  return out;
}

using LaunchFn = CUresult (*)(CUgraphExec, CUstream);

CUresult launch_replay(LaunchFn real, CUgraphExec exec, CUstream stream) noexcept {
  const GraphOps* graph = graph_ops_of_exec(reinterpret_cast<uint64_t>(exec));
  if (!graph || graph->ops.empty() || !recording()) return real(exec, stream);
  int64_t begin_ns = monotonic_ns();
  uint64_t launch_id = new_launch_id();
  bool into_capture = false;  // launched into another capture: it runs when that graph does
  TimedLaunch timed = begin_timed_replay(as_u64(stream), graph->ops.front().track, replay_shape(*graph), into_capture,
                                         kReplaySampleScale);
  CUresult result = real(exec, stream);
  int64_t end_ns = monotonic_ns();
  if (result != CUDA_SUCCESS || into_capture) {
    if (into_capture) graph_replay_not_followed(*graph, as_u64(exec), "launched into another stream capture");
    // A failed launch ran nothing; its start event (if any) goes with an empty timing.
    if (timed) end_timed_launch(timed, as_u64(stream), launch_id, nullptr, 0, Api::kGroupEnd, 0, begin_ns, end_ns, nullptr);
    return result;
  }
  ReplayedOps ops{};
  try {
    ops = record_replayed_ops(*graph, stream, launch_id, begin_ns, end_ns, timed && timed.timed);
  } catch (...) {
    report_internal_error();
  }
  const CapturedOp& lead = graph->ops.front();
  if (timed)
    end_timed_launch(timed, as_u64(stream), launch_id, lead.track, ops.lead_seq, lead.api,
                     static_cast<uint32_t>(graph->ops.size()), begin_ns, end_ns, nullptr, graph->index);
  return result;
}

// ---------------------------------------------------------------------------------- wrappers

template <Entry E> CUresult graph_launch(CUgraphExec exec, CUstream stream) {
  auto real = real_entry<LaunchFn>(E);
  if (!real) return no_driver(E);
  if (g_nccl_execs.load(std::memory_order_relaxed) == 0) [[likely]]
    return real(exec, stream);
  return launch_replay(real, exec, stream);
}

CUresult begun(CUresult result) {
  if (result == CUDA_SUCCESS) capture_begun();
  return result;
}

template <Entry E> CUresult begin_capture(CUstream stream) {
  auto real = real_entry<CUresult (*)(CUstream)>(E);
  return real ? begun(real(stream)) : no_driver(E);
}

template <Entry E> CUresult begin_capture_v2(CUstream stream, CUstreamCaptureMode mode) {
  auto real = real_entry<CUresult (*)(CUstream, CUstreamCaptureMode)>(E);
  return real ? begun(real(stream, mode)) : no_driver(E);
}

template <Entry E>
CUresult begin_capture_to_graph(CUstream stream, CUgraph graph, const CUgraphNode* deps, const CUgraphEdgeData* edges,
                                size_t ndeps, CUstreamCaptureMode mode) {
  auto real = real_entry<CUresult (*)(CUstream, CUgraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
                                      CUstreamCaptureMode)>(E);
  return real ? begun(real(stream, graph, deps, edges, ndeps, mode)) : no_driver(E);
}

template <Entry E> CUresult end_capture(CUstream stream, CUgraph* graph) {
  auto real = real_entry<CUresult (*)(CUstream, CUgraph*)>(E);
  if (!real) return no_driver(E);
  uint64_t capture_id = captures_may_be_open() ? stream_capture_id(as_u64(stream)) : 0;
  CUresult result = real(stream, graph);
  if (capture_id) capture_ended(capture_id, result == CUDA_SUCCESS && graph ? as_u64(*graph) : 0, result);
  return result;
}

CUresult instantiated(CUresult result, CUgraphExec* exec, CUgraph graph) {
  if (result == CUDA_SUCCESS && exec) graph_instantiated(as_u64(graph), as_u64(*exec));
  return result;
}

template <Entry E>
CUresult instantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log, size_t log_size) {
  auto real = real_entry<CUresult (*)(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t)>(E);
  return real ? instantiated(real(exec, graph, error_node, log, log_size), exec, graph) : no_driver(E);
}

template <Entry E> CUresult instantiate_with_flags(CUgraphExec* exec, CUgraph graph, unsigned long long flags) {
  auto real = real_entry<CUresult (*)(CUgraphExec*, CUgraph, unsigned long long)>(E);
  return real ? instantiated(real(exec, graph, flags), exec, graph) : no_driver(E);
}

template <Entry E>
CUresult instantiate_with_params(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  auto real = real_entry<CUresult (*)(CUgraphExec*, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS*)>(E);
  return real ? instantiated(real(exec, graph, params), exec, graph) : no_driver(E);
}

template <Entry E>
CUresult exec_update(CUgraphExec exec, CUgraph graph, CUgraphNode* error_node, CUgraphExecUpdateResult* outcome) {
  auto real = real_entry<CUresult (*)(CUgraphExec, CUgraph, CUgraphNode*, CUgraphExecUpdateResult*)>(E);
  if (!real) return no_driver(E);
  CUresult result = real(exec, graph, error_node, outcome);
  graph_exec_updated(as_u64(exec), as_u64(graph), result == CUDA_SUCCESS);
  return result;
}

template <Entry E> CUresult exec_update_v2(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo* info) {
  auto real = real_entry<CUresult (*)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo*)>(E);
  if (!real) return no_driver(E);
  CUresult result = real(exec, graph, info);
  graph_exec_updated(as_u64(exec), as_u64(graph), result == CUDA_SUCCESS);
  return result;
}

// Forgotten before the driver frees them: a new graph may get the same address right after.
template <Entry E> CUresult graph_destroy(CUgraph graph) {
  auto real = real_entry<CUresult (*)(CUgraph)>(E);
  if (!real) return no_driver(E);
  graph_destroyed(as_u64(graph));
  return real(graph);
}

template <Entry E> CUresult exec_destroy(CUgraphExec exec) {
  auto real = real_entry<CUresult (*)(CUgraphExec)>(E);
  if (!real) return no_driver(E);
  graph_exec_destroyed(as_u64(exec));
  return real(exec);
}

void* wrapper_for_request(const char* symbol, int version, cuuint64_t flags, void* real) noexcept;

template <Entry E> CUresult get_proc_address(const char* symbol, void** fn, int version, cuuint64_t flags) {
  auto real = real_entry<CUresult (*)(const char*, void**, int, cuuint64_t)>(E);
  if (!real) return no_driver(E);
  CUresult result = real(symbol, fn, version, flags);
  if (result == CUDA_SUCCESS && fn && *fn)
    if (void* wrapper = wrapper_for_request(symbol, version, flags, *fn)) *fn = wrapper;
  return result;
}

template <Entry E>
CUresult get_proc_address_v2(const char* symbol, void** fn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  auto real = real_entry<CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*)>(E);
  if (!real) return no_driver(E);
  CUresult result = real(symbol, fn, version, flags, status);
  if (result == CUDA_SUCCESS && fn && *fn)
    if (void* wrapper = wrapper_for_request(symbol, version, flags, *fn)) *fn = wrapper;
  return result;
}

}  // namespace
}  // namespace ncclwatch

// The exported names: the same wrappers, for programs linked against libcuda.so.1.
using namespace ncclwatch;
#define NCCLWATCH_CUDA_EXPORT extern "C" __attribute__((visibility("default")))
NCCLWATCH_CUDA_EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s) { return graph_launch<Entry::kGraphLaunch>(e, s); }
NCCLWATCH_CUDA_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s) {
  return graph_launch<Entry::kGraphLaunchPtsz>(e, s);
}
NCCLWATCH_CUDA_EXPORT CUresult cuStreamBeginCapture(CUstream s) { return begin_capture<Entry::kBeginCapture>(s); }
NCCLWATCH_CUDA_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode m) {
  return begin_capture_v2<Entry::kBeginCaptureV2>(s, m);
}
NCCLWATCH_CUDA_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode m) {
  return begin_capture_v2<Entry::kBeginCaptureV2Ptsz>(s, m);
}
NCCLWATCH_CUDA_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode* d,
                                                           const CUgraphEdgeData* e, size_t n, CUstreamCaptureMode m) {
  return begin_capture_to_graph<Entry::kBeginCaptureToGraph>(s, g, d, e, n, m);
}
NCCLWATCH_CUDA_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g, const CUgraphNode* d,
                                                                const CUgraphEdgeData* e, size_t n,
                                                                CUstreamCaptureMode m) {
  return begin_capture_to_graph<Entry::kBeginCaptureToGraphPtsz>(s, g, d, e, n, m);
}
NCCLWATCH_CUDA_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph* g) { return end_capture<Entry::kEndCapture>(s, g); }
NCCLWATCH_CUDA_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph* g) {
  return end_capture<Entry::kEndCapturePtsz>(s, g);
}
NCCLWATCH_CUDA_EXPORT CUresult cuGraphInstantiate(CUgraphExec* x, CUgraph g, CUgraphNode* n, char* l, size_t z) {
  return instantiate<Entry::kInstantiate>(x, g, n, l, z);
}
NCCLWATCH_CUDA_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec* x, CUgraph g, CUgraphNode* n, char* l, size_t z) {
  return instantiate<Entry::kInstantiateV2>(x, g, n, l, z);
}
NCCLWATCH_CUDA_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* x, CUgraph g, unsigned long long f) {
  return instantiate_with_flags<Entry::kInstantiateWithFlags>(x, g, f);
}
NCCLWATCH_CUDA_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec* x, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  return instantiate_with_params<Entry::kInstantiateWithParams>(x, g, p);
}
NCCLWATCH_CUDA_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* x, CUgraph g,
                                                                 CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
  return instantiate_with_params<Entry::kInstantiateWithParamsPtsz>(x, g, p);
}
NCCLWATCH_CUDA_EXPORT CUresult cuGraphExecUpdate(CUgraphExec x, CUgraph g, CUgraphNode* n, CUgraphExecUpdateResult* r) {
  return exec_update<Entry::kExecUpdate>(x, g, n, r);
}
NCCLWATCH_CUDA_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec x, CUgraph g, CUgraphExecUpdateResultInfo* i) {
  return exec_update_v2<Entry::kExecUpdateV2>(x, g, i);
}
NCCLWATCH_CUDA_EXPORT CUresult cuGraphDestroy(CUgraph g) { return graph_destroy<Entry::kGraphDestroy>(g); }
NCCLWATCH_CUDA_EXPORT CUresult cuGraphExecDestroy(CUgraphExec x) { return exec_destroy<Entry::kExecDestroy>(x); }
NCCLWATCH_CUDA_EXPORT CUresult cuGetProcAddress(const char* s, void** f, int v, cuuint64_t fl) {
  return get_proc_address<Entry::kGetProcAddress>(s, f, v, fl);
}
NCCLWATCH_CUDA_EXPORT CUresult cuGetProcAddress_v2(const char* s, void** f, int v, cuuint64_t fl,
                                                   CUdriverProcAddressQueryResult* st) {
  return get_proc_address_v2<Entry::kGetProcAddressV2>(s, f, v, fl, st);
}

namespace ncclwatch {
namespace {

void* wrapper_of(Entry e) noexcept {
  switch (e) {
    case Entry::kGraphLaunch: return reinterpret_cast<void*>(&::cuGraphLaunch);
    case Entry::kGraphLaunchPtsz: return reinterpret_cast<void*>(&::cuGraphLaunch_ptsz);
    case Entry::kBeginCapture: return reinterpret_cast<void*>(&::cuStreamBeginCapture);
    case Entry::kBeginCaptureV2: return reinterpret_cast<void*>(&::cuStreamBeginCapture_v2);
    case Entry::kBeginCaptureV2Ptsz: return reinterpret_cast<void*>(&::cuStreamBeginCapture_v2_ptsz);
    case Entry::kBeginCaptureToGraph: return reinterpret_cast<void*>(&::cuStreamBeginCaptureToGraph);
    case Entry::kBeginCaptureToGraphPtsz: return reinterpret_cast<void*>(&::cuStreamBeginCaptureToGraph_ptsz);
    case Entry::kEndCapture: return reinterpret_cast<void*>(&::cuStreamEndCapture);
    case Entry::kEndCapturePtsz: return reinterpret_cast<void*>(&::cuStreamEndCapture_ptsz);
    case Entry::kInstantiate: return reinterpret_cast<void*>(&::cuGraphInstantiate);
    case Entry::kInstantiateV2: return reinterpret_cast<void*>(&::cuGraphInstantiate_v2);
    case Entry::kInstantiateWithFlags: return reinterpret_cast<void*>(&::cuGraphInstantiateWithFlags);
    case Entry::kInstantiateWithParams: return reinterpret_cast<void*>(&::cuGraphInstantiateWithParams);
    case Entry::kInstantiateWithParamsPtsz: return reinterpret_cast<void*>(&::cuGraphInstantiateWithParams_ptsz);
    case Entry::kExecUpdate: return reinterpret_cast<void*>(&::cuGraphExecUpdate);
    case Entry::kExecUpdateV2: return reinterpret_cast<void*>(&::cuGraphExecUpdate_v2);
    case Entry::kGraphDestroy: return reinterpret_cast<void*>(&::cuGraphDestroy);
    case Entry::kExecDestroy: return reinterpret_cast<void*>(&::cuGraphExecDestroy);
    case Entry::kGetProcAddress: return reinterpret_cast<void*>(&::cuGetProcAddress);
    case Entry::kGetProcAddressV2: return reinterpret_cast<void*>(&::cuGetProcAddress_v2);
    case Entry::kCount: break;
  }
  return nullptr;
}

constexpr Entry kNone = Entry::kCount;

// Which entry cuGetProcAddress(symbol, version, flags) hands out: the driver picks a function by
// the base name, the caller's CUDA version and the per-thread-stream flag (cudaTypedefs.h lists
// each name's versions). Only variants whose ABI is certain are wrapped; others pass through.
Entry entry_for_request(const char* symbol, int version, cuuint64_t flags) noexcept {
  bool ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  auto is = [symbol](const char* name) { return std::strcmp(symbol, name) == 0; };
  if (is("cuGraphLaunch")) return ptsz ? Entry::kGraphLaunchPtsz : Entry::kGraphLaunch;
  if (is("cuStreamBeginCapture")) {
    if (version >= 10010) return ptsz ? Entry::kBeginCaptureV2Ptsz : Entry::kBeginCaptureV2;
    return ptsz ? kNone : Entry::kBeginCapture;
  }
  if (is("cuStreamBeginCaptureToGraph")) return ptsz ? Entry::kBeginCaptureToGraphPtsz : Entry::kBeginCaptureToGraph;
  if (is("cuStreamEndCapture")) return ptsz ? Entry::kEndCapturePtsz : Entry::kEndCapture;
  if (is("cuGraphInstantiate")) {
    if (version >= 12000) return Entry::kInstantiateWithFlags;  // cuda.h: cuGraphInstantiate is WithFlags
    return version >= 11000 ? Entry::kInstantiateV2 : Entry::kInstantiate;
  }
  if (is("cuGraphInstantiateWithFlags")) return Entry::kInstantiateWithFlags;
  if (is("cuGraphInstantiateWithParams")) return ptsz ? Entry::kInstantiateWithParamsPtsz : Entry::kInstantiateWithParams;
  if (is("cuGraphExecUpdate")) return version >= 12000 ? Entry::kExecUpdateV2 : Entry::kExecUpdate;
  if (is("cuGraphDestroy")) return Entry::kGraphDestroy;
  if (is("cuGraphExecDestroy")) return Entry::kExecDestroy;
  if (is("cuGetProcAddress")) return version >= 12000 ? Entry::kGetProcAddressV2 : Entry::kGetProcAddress;
  return kNone;
}

void* wrapper_for_request(const char* symbol, int version, cuuint64_t flags, void* real) noexcept {
  if (!symbol || symbol[0] != 'c' || is_inside_shim(real) || !following_graphs()) return nullptr;
  Entry e = entry_for_request(symbol, version, flags);
  if (e == kNone) return nullptr;
  keep_real(e, real);
  return wrapper_of(e);
}

}  // namespace

bool is_interposed_cuda_entry(const char* name) noexcept {
  for (const char* symbol : kSymbols)
    if (std::strcmp(name, symbol) == 0) return true;
  return false;
}

void* cuda_entry_wrapper_for_symbol(const char* name, void* real) noexcept {
  if (!following_graphs()) return nullptr;
  for (int i = 0; i < kEntries; ++i) {
    if (std::strcmp(name, kSymbols[i]) != 0) continue;
    keep_real(static_cast<Entry>(i), real);
    return wrapper_of(static_cast<Entry>(i));
  }
  return nullptr;
}

}  // namespace ncclwatch
