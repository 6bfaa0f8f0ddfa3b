// Wrappers for collectives, point-to-point calls and groups: the shim's hot path. Each call gets
// its sequence number, one compact record in the trace's ring and a count in its totals; GPU
// events bracket each launch (an ungrouped call, or the outermost ncclGroupEnd, per stream). No
// lock, no allocation in the steady state.
#include "comms/comms.h"
#include "gpu/gpu.h"
#include "graph/graph.h"
#include "process/process.h"
#include "profiler/profiler.h"
#include "trace/trace.h"
#include "wrap/op_record.h"
#include "wrap/recorder.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace ncclwatch {
namespace {

using trace::Api;

// The thread's open NCCL group is t_thread.group (thread_state.h).
void note_group_stream(uint64_t stream, CommTrack* track, uint64_t seq, Api api) {
  for (int i = 0; i < t_thread.group.nstreams; ++i) {
    OpenGroup::StreamUse& use = t_thread.group.streams[i];
    if (use.stream == stream) {
      use = {stream, track, seq, api, use.ops + 1, use.several_comms || use.track != track};
      return;
    }
  }
  if (t_thread.group.nstreams < OpenGroup::kMaxStreams) t_thread.group.streams[t_thread.group.nstreams++] = {stream, track, seq, api, 1, false};
}

// Calls NCCL with the op named in t_thread.issuing: NCCL's profiler callbacks for the call run inside
// it, on this thread, and tie what NCCL planned to this op (profiler/).
// Only while the plugin is armed (NCCLWATCH_PROFILER): otherwise one load and a branch.
template <class Call>
ncclResult_t call_issuing(const OpArgs& a, const CommTrack* track, uint64_t launch_id, uint64_t seq,
                          Call&& call) noexcept {
  if (!profiler_plugin_armed()) [[likely]]
    return call();
  t_thread.issuing = {launch_id, seq, track, a.count, a.peer, static_cast<uint16_t>(a.api), static_cast<uint8_t>(a.datatype)};
  ncclResult_t result = call();
  t_thread.issuing.launch_id = 0;
  return result;
}

// An op issued on a stream capturing a CUDA graph runs nothing now: it joins the capture's ops, which
// every launch of the graph replays (wrap/cuda_graphs.cc), and takes no seq of its own.
template <class Call> ncclResult_t run_captured_op(const OpArgs& a, uint64_t capture_id, Call&& call) noexcept {
  int64_t begin_ns = monotonic_ns();
  CommTrack* track = find_comm_track(as_u64(a.comm));
  bool grouped = t_thread.group.depth > 0;
  if (grouped) ++t_thread.group.ops;
  uint64_t launch_id = grouped ? t_thread.group.launch_id : new_launch_id();
  uint32_t graph = trace::is_one_sided(a.api)
                       ? 0
                       : note_captured_op(capture_id, {track, as_u64(a.comm), a.api, a.count,
                                                       static_cast<uint8_t>(a.datatype), a.redop, a.peer,
                                                       static_cast<uint16_t>(a.flags | (a.in_place ? trace::kOpInPlace : 0))});
  ncclResult_t result = call_issuing(a, track, launch_id, 0, call);
  uint16_t flags = a.flags | trace::kOpCaptured | (a.in_place ? trace::kOpInPlace : 0);
  write_op_record(a, comm_ref_index(track, as_u64(a.comm)), 0, launch_id, begin_ns, monotonic_ns(), result, flags,
                  t_thread.group.depth, graph);
  return result;
}

// The shape of every op wrapper: sequence, time the launch (ungrouped), call, record.
template <class Call> ncclResult_t run_op(const OpArgs& a, Call&& call) noexcept {
  if (captures_may_be_open()) [[unlikely]]
    if (uint64_t capture_id = stream_capture_id(as_u64(a.stream))) return run_captured_op(a, capture_id, call);
  int64_t begin_ns = monotonic_ns();
  CommTrack* track = find_comm_track(as_u64(a.comm));
  uint64_t seq = 0;
  if (track && !trace::is_one_sided(a.api)) {
    seq = trace::is_point_to_point(a.api) ? track->next_p2p_seq(a.peer, a.api == Api::kRecv)
                                          : track->issued.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  uint64_t stream = as_u64(a.stream);
  bool grouped = t_thread.group.depth > 0;
  uint64_t launch_id = grouped ? t_thread.group.launch_id : new_launch_id();
  bool captured = false;
  TimedLaunch timed;
  if (grouped) {
    ++t_thread.group.ops;
    captured = stream_is_capturing(stream);
    if (!captured) note_group_stream(stream, track, seq, a.api);
  } else {
    timed = begin_timed_launch(stream, track, op_shape(a.api, a.count, a.datatype), captured);
  }

  ncclResult_t result = call_issuing(a, track, launch_id, seq, call);

  int64_t end_ns = monotonic_ns();
  uint16_t flags = a.flags | (captured ? trace::kOpCaptured : 0) | (a.in_place ? trace::kOpInPlace : 0);
  uint32_t comm_index = comm_ref_index(track, as_u64(a.comm));
  trace::OpTotalsEntry* totals = op_totals_entry(comm_index, a.api, a.count, static_cast<uint8_t>(a.datatype), begin_ns);
  count_op_call(totals, begin_ns, end_ns - begin_ns);
  if (!timed) {  // host timing, grouped, captured: nothing to hand over (this path keeps nothing live past the write)
    write_op_record(a, comm_index, seq, launch_id, begin_ns, end_ns, result, flags, t_thread.group.depth);
    return result;
  }
  if (timed.timed) flags |= trace::kOpTimed;
  // The op's record before its launch goes to the collector: a reader pairs a timing with the op
  // records before it, and the collector may write the timing at once.
  write_op_record(a, comm_index, seq, launch_id, begin_ns, end_ns, result, flags, t_thread.group.depth);
  end_timed_launch(timed, stream, launch_id, track, trace::is_point_to_point(a.api) ? 0 : seq, a.api, 1, begin_ns, end_ns,
                   totals);
  return result;
}

}  // namespace
}  // namespace ncclwatch

using namespace ncclwatch;

NCCLWATCH_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                            cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclAllReduce, sendbuff, recvbuff, count, datatype, op, comm, stream)
  return run_op({trace::Api::kAllReduce, comm, stream, count, datatype, op, -1, sendbuff == recvbuff},
                [&] { return real->ncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream); });
}

NCCLWATCH_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                            ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclBroadcast, sendbuff, recvbuff, count, datatype, root, comm, stream)
  return run_op({trace::Api::kBroadcast, comm, stream, count, datatype, -1, root, sendbuff == recvbuff},
                [&] { return real->ncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

NCCLWATCH_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                        cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclBcast, buff, count, datatype, root, comm, stream)
  return run_op({trace::Api::kBcast, comm, stream, count, datatype, -1, root, true},
                [&] { return real->ncclBcast(buff, count, datatype, root, comm, stream); });
}

NCCLWATCH_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclReduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream)
  return run_op({trace::Api::kReduce, comm, stream, count, datatype, op, root, sendbuff == recvbuff},
                [&] { return real->ncclReduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream); });
}

NCCLWATCH_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclAllGather, sendbuff, recvbuff, sendcount, datatype, comm, stream)
  return run_op({trace::Api::kAllGather, comm, stream, sendcount, datatype, -1, -1, sendbuff == recvbuff},
                [&] { return real->ncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream); });
}

NCCLWATCH_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                                cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, comm, stream)
  return run_op({trace::Api::kReduceScatter, comm, stream, recvcount, datatype, op, -1, sendbuff == recvbuff},
                [&] { return real->ncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream); });
}

NCCLWATCH_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                           ncclComm_t comm, cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclAlltoAll, sendbuff, recvbuff, count, datatype, comm, stream)
  return run_op({trace::Api::kAlltoAll, comm, stream, count, datatype, -1, -1, sendbuff == recvbuff},
                [&] { return real->ncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream); });
}

NCCLWATCH_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                         int root, ncclComm_t comm, cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclGather, sendbuff, recvbuff, count, datatype, root, comm, stream)
  return run_op({trace::Api::kGather, comm, stream, count, datatype, -1, root, sendbuff == recvbuff},
                [&] { return real->ncclGather(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

NCCLWATCH_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                          int root, ncclComm_t comm, cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclScatter, sendbuff, recvbuff, count, datatype, root, comm, stream)
  return run_op({trace::Api::kScatter, comm, stream, count, datatype, -1, root, sendbuff == recvbuff},
                [&] { return real->ncclScatter(sendbuff, recvbuff, count, datatype, root, comm, stream); });
}

// The *Config variants (NCCL >= 2.31) are their base collective with a per-call tuning config:
// the same op, sequence and record, flagged.
NCCLWATCH_EXPORT ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                                  ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                                  cudaStream_t stream, const ncclCollConfig_t* config) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclAllReduceConfig, sendbuff, recvbuff, count, datatype, op, comm, stream, config)
  return run_op({trace::Api::kAllReduce, comm, stream, count, datatype, op, -1, sendbuff == recvbuff, trace::kOpCollConfig},
                [&] { return real->ncclAllReduceConfig(sendbuff, recvbuff, count, datatype, op, comm, stream, config); });
}

NCCLWATCH_EXPORT ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count,
                                                  ncclDataType_t datatype, int root, ncclComm_t comm,
                                                  cudaStream_t stream, const ncclCollConfig_t* config) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclBroadcastConfig, sendbuff, recvbuff, count, datatype, root, comm, stream, config)
  return run_op({trace::Api::kBroadcast, comm, stream, count, datatype, -1, root, sendbuff == recvbuff, trace::kOpCollConfig},
                [&] { return real->ncclBroadcastConfig(sendbuff, recvbuff, count, datatype, root, comm, stream, config); });
}

NCCLWATCH_EXPORT ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count,
                                               ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                                               cudaStream_t stream, const ncclCollConfig_t* config) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclReduceConfig, sendbuff, recvbuff, count, datatype, op, root, comm, stream, config)
  return run_op({trace::Api::kReduce, comm, stream, count, datatype, op, root, sendbuff == recvbuff, trace::kOpCollConfig},
                [&] { return real->ncclReduceConfig(sendbuff, recvbuff, count, datatype, op, root, comm, stream, config); });
}

NCCLWATCH_EXPORT ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount,
                                                  ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                                  const ncclCollConfig_t* config) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclAllGatherConfig, sendbuff, recvbuff, sendcount, datatype, comm, stream, config)
  return run_op({trace::Api::kAllGather, comm, stream, sendcount, datatype, -1, -1, sendbuff == recvbuff, trace::kOpCollConfig},
                [&] { return real->ncclAllGatherConfig(sendbuff, recvbuff, sendcount, datatype, comm, stream, config); });
}

NCCLWATCH_EXPORT ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount,
                                                      ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                                      cudaStream_t stream, const ncclCollConfig_t* config) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclReduceScatterConfig, sendbuff, recvbuff, recvcount, datatype, op, comm, stream, config)
  return run_op({trace::Api::kReduceScatter, comm, stream, recvcount, datatype, op, -1, sendbuff == recvbuff,
                 trace::kOpCollConfig},
                [&] { return real->ncclReduceScatterConfig(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, config); });
}

NCCLWATCH_EXPORT ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count,
                                                 ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream,
                                                 const ncclCollConfig_t* config) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclAlltoAllConfig, sendbuff, recvbuff, count, datatype, comm, stream, config)
  return run_op({trace::Api::kAlltoAll, comm, stream, count, datatype, -1, -1, sendbuff == recvbuff, trace::kOpCollConfig},
                [&] { return real->ncclAlltoAllConfig(sendbuff, recvbuff, count, datatype, comm, stream, config); });
}

NCCLWATCH_EXPORT ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count,
                                               ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
                                               const ncclCollConfig_t* config) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclGatherConfig, sendbuff, recvbuff, count, datatype, root, comm, stream, config)
  return run_op({trace::Api::kGather, comm, stream, count, datatype, -1, root, sendbuff == recvbuff, trace::kOpCollConfig},
                [&] { return real->ncclGatherConfig(sendbuff, recvbuff, count, datatype, root, comm, stream, config); });
}

NCCLWATCH_EXPORT ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count,
                                                ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream,
                                                const ncclCollConfig_t* config) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclScatterConfig, sendbuff, recvbuff, count, datatype, root, comm, stream, config)
  return run_op({trace::Api::kScatter, comm, stream, count, datatype, -1, root, sendbuff == recvbuff, trace::kOpCollConfig},
                [&] { return real->ncclScatterConfig(sendbuff, recvbuff, count, datatype, root, comm, stream, config); });
}

NCCLWATCH_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                       ncclComm_t comm, cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclSend, sendbuff, count, datatype, peer, comm, stream)
  return run_op({trace::Api::kSend, comm, stream, count, datatype, -1, peer, false},
                [&] { return real->ncclSend(sendbuff, count, datatype, peer, comm, stream); });
}

NCCLWATCH_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                       ncclComm_t comm, cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclRecv, recvbuff, count, datatype, peer, comm, stream)
  return run_op({trace::Api::kRecv, comm, stream, count, datatype, -1, peer, false},
                [&] { return real->ncclRecv(recvbuff, count, datatype, peer, comm, stream); });
}

// One-sided signals on registered windows (NCCL 2.29): recorded and timed, without a seq.
NCCLWATCH_EXPORT ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                                            unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclPutSignal, localbuff, count, datatype, peer, peerWin, peerWinOffset, sigIdx, ctx, flags,
                               comm, stream)
  return run_op({trace::Api::kPutSignal, comm, stream, count, datatype, -1, peer, false}, [&] {
    return real->ncclPutSignal(localbuff, count, datatype, peer, peerWin, peerWinOffset, sigIdx, ctx, flags, comm, stream);
  });
}

NCCLWATCH_EXPORT ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                                         cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclSignal, peer, sigIdx, ctx, flags, comm, stream)
  return run_op({trace::Api::kSignal, comm, stream, 0, ncclInt8, -1, peer, false},
                [&] { return real->ncclSignal(peer, sigIdx, ctx, flags, comm, stream); });
}

// The count recorded is the number of signal descriptors waited on.
NCCLWATCH_EXPORT ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                                             cudaStream_t stream) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclWaitSignal, nDesc, signalDescs, comm, stream)
  return run_op({trace::Api::kWaitSignal, comm, stream, nDesc > 0 ? static_cast<size_t>(nDesc) : 0, ncclInt8, -1, -1,
                 false},
                [&] { return real->ncclWaitSignal(nDesc, signalDescs, comm, stream); });
}

NCCLWATCH_EXPORT ncclResult_t ncclGroupStart() {
  NCCLWATCH_FORWARD_UNRECORDED(ncclGroupStart)
  ncclResult_t result = real->ncclGroupStart();
  if (result == ncclSuccess && t_thread.group.depth++ == 0) {
    t_thread.group.launch_id = new_launch_id();
    t_thread.group.ops = 0;
    t_thread.group.nstreams = 0;
  }
  return result;
}

namespace {
// The outermost ncclGroupEnd launches what the group held: time it per stream, record it.
template <class Call> ncclResult_t end_group(Api api, Call&& call) noexcept {
  if (t_thread.group.depth == 0) return call();  // a group we did not see start: just forward
  if (t_thread.group.depth > 1) {
    --t_thread.group.depth;
    return call();
  }
  int64_t begin_ns = monotonic_ns();
  TimedLaunch timed[OpenGroup::kMaxStreams];
  bool launches = api == Api::kGroupEnd;
  for (int i = 0; launches && i < t_thread.group.nstreams; ++i) {
    bool captured = false;
    const OpenGroup::StreamUse& use = t_thread.group.streams[i];
    timed[i] = begin_timed_launch(use.stream, use.track, op_shape(api, use.ops, static_cast<int>(use.api)), captured);
  }
  ncclResult_t result = call();
  int64_t end_ns = monotonic_ns();
  CommTrack* first = t_thread.group.nstreams ? t_thread.group.streams[0].track : nullptr;
  uint32_t comm_index = comm_ref_index(first, first ? first->handle : 0);
  trace::OpTotalsEntry* totals = op_totals_entry(comm_index, api, t_thread.group.ops, ncclInt8, begin_ns);
  count_op_call(totals, begin_ns, end_ns - begin_ns);
  // The group end's record says whether a GPU timing of its launch follows (kOpTimed) and names
  // the communicator of its first op, so analyzers can wait for the timing and attribute it.
  uint16_t flags = 0;
  for (int i = 0; launches && i < t_thread.group.nstreams; ++i) {
    const OpenGroup::StreamUse& use = t_thread.group.streams[i];
    // A failed group is not read for memory; one of several streams or communicators reads only
    // NCCL's count (the free memory's fall is the whole group's).
    if (result != ncclSuccess) timed[i].first_of_shape = false;
    timed[i].shared = t_thread.group.nstreams > 1 || use.several_comms;
    // The GPU time of a one-stream group is the group's; of several streams, no stream's alone.
    end_timed_launch(timed[i], use.stream, t_thread.group.launch_id, use.track,
                     trace::is_point_to_point(use.api) ? 0 : use.seq, use.api, use.ops, begin_ns, end_ns,
                     t_thread.group.nstreams == 1 ? totals : nullptr);
    if (timed[i].timed) flags |= trace::kOpTimed;
  }
  t_thread.group.depth = 0;
  OpArgs args{api, first ? reinterpret_cast<ncclComm_t>(first->handle) : nullptr, nullptr, t_thread.group.ops, ncclInt8,
              -1, -1, false};
  write_op_record(args, comm_index, 0, t_thread.group.launch_id, begin_ns, end_ns, result, flags, 0);
  return result;
}
}  // namespace

NCCLWATCH_EXPORT ncclResult_t ncclGroupEnd() {
  NCCLWATCH_FORWARD_UNRECORDED(ncclGroupEnd)
  return end_group(trace::Api::kGroupEnd, [&] { return real->ncclGroupEnd(); });
}

NCCLWATCH_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  NCCLWATCH_FORWARD_UNRECORDED(ncclGroupSimulateEnd, simInfo)
  return end_group(trace::Api::kGroupSimulateEnd, [&] { return real->ncclGroupSimulateEnd(simInfo); });
}
