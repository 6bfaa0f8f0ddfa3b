// The exported NCCL API of the stand-in: strong pnccl* definitions with weak
// nccl* aliases, like the real library (so a profiler or shim can
// interpose the nccl* names and still reach the implementation).
#include "hostnccl_ops.h"
#include "hostnccl_profiler.h"
#include "hostnccl_reduce.h"

#include <cstdlib>

// Not declared by nccl.h (they live in the device API headers, which need a
// CUDA compiler); the structs are opaque here.
struct ncclDevCommRequirements;
struct ncclDevComm;

// NCCL 2.31's per-call collective config, when nccl.h is older; the stand-in ignores its content.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 31, 0)
struct ncclwatchCollConfig;
typedef struct ncclwatchCollConfig ncclCollConfig_t;
#endif

// NCCL 2.29's grow, suspend/resume and one-sided signals, when nccl.h is older.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 0)
struct ncclwatchWaitSignalDesc;
typedef struct ncclwatchWaitSignalDesc ncclWaitSignalDesc_t;
#endif

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 7)
typedef enum { ncclStatGpuMemSuspend = 0, ncclStatGpuMemSuspended = 1, ncclStatGpuMemPersist = 2, ncclStatGpuMemTotal = 3 } ncclCommMemStat_t;
#endif

extern "C" {
ncclResult_t pncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                                struct ncclDevComm* outDevComm);
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                               struct ncclDevComm* outDevComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm);
}

// A registered buffer or window; the handle given to the caller.
struct ncclWindow_vidmem {
  void* buff;
  size_t size;
  int flags;
};

namespace {

using namespace hostnccl;

struct Registration {
  void* buff;
  size_t size;
};

ncclResult_t invalid(const char* fmt, const char* what) {
  set_last_error(fmt, what);
  return ncclInvalidArgument;
}

// Checks the arguments NCCL checks, then queues the operation.
ncclResult_t collective(const char* name, Kind kind, const void* send, void* recv, size_t count,
                        ncclDataType_t type, ncclRedOp_t redop, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  CommState* s = state_of(comm);
  if (!s) return invalid("%s: invalid communicator", name);
  if (s->revoked.load()) {
    set_last_error("%s: communicator was revoked", name);
    return ncclInvalidUsage;
  }
  if (type_size(type) == 0) return invalid("%s: unsupported datatype", name);
  const bool rooted = kind == Kind::Broadcast || kind == Kind::Reduce || kind == Kind::Gather ||
                      kind == Kind::Scatter;
  const bool p2p = kind == Kind::Send || kind == Kind::Recv;
  if ((rooted || p2p) && (root < 0 || root >= s->nranks)) return invalid("%s: root/peer out of range", name);

  // Buffers each rank actually reads or writes must exist.
  const bool is_root = rooted && root == s->rank;
  bool need_send = count > 0 && kind != Kind::Recv;
  bool need_recv = count > 0 && kind != Kind::Send;
  if (kind == Kind::Broadcast || kind == Kind::Scatter) need_send = need_send && is_root;
  if (kind == Kind::Reduce || kind == Kind::Gather) need_recv = need_recv && is_root;
  if ((need_send && !send) || (need_recv && !recv)) return invalid("%s: NULL buffer", name);

  Op op;
  op.kind = kind;
  op.comm = comm->state;
  op.send = send;
  op.recv = recv;
  op.count = count;
  op.type = type;
  op.root = root;
  if (kind == Kind::AllReduce || kind == Kind::Reduce || kind == Kind::ReduceScatter) {
    if (int(redop) >= 0 && int(redop) < int(ncclNumOps)) {
      op.red.base = redop;
    } else {
      std::lock_guard<std::mutex> g(s->mu);
      auto it = s->premul_ops.find(int(redop));
      if (it == s->premul_ops.end()) return invalid("%s: invalid reduction op", name);
      if (it->second.type != type) return invalid("%s: PreMulSum op made for another datatype", name);
      op.red.base = ncclSum;
      op.red.premul = true;
      op.red.scalar = it->second;
    }
  }
  op.profiler_api = profiler_api_start(*s, op, stream);
  void* api_event = op.profiler_api;
  ncclResult_t result = submit(std::move(op), stream);
  profiler_api_stop(api_event);
  return result;
}

template <class Set, class T>
bool erase_from(CommState& s, Set& set, T key) {
  std::lock_guard<std::mutex> g(s.mu);
  return set.erase(key) > 0;
}

}  // namespace

extern "C" {

// ------------------------------------------------------------------ general

ncclResult_t pncclGetVersion(int* version) {
  if (!version) return invalid("%s: version is NULL", "GetVersion");
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (!uniqueId) return invalid("%s: uniqueId is NULL", "GetUniqueId");
  make_unique_id(uniqueId);
  return ncclSuccess;
}

const char* pncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* pncclGetLastError(ncclComm_t) { return last_error(); }

// ------------------------------------------------------------ communicators

ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return init_rank(comm, nranks, commId, rank, nullptr, -1);
}

ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config) {
  return init_rank(comm, nranks, commId, rank, config, -1);
}

ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config) {
  if (nId < 1 || !commIds) return invalid("%s: no unique ids", "CommInitRankScalable");
  return init_rank(newcomm, nranks, commIds[0], myrank, config, -1);
}

ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  return init_all(comm, ndev, devlist);
}

ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  return split(comm, color, key, newcomm, config);
}

ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return shrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
}

ncclResult_t pncclCommFinalize(ncclComm_t comm) {
  CommState* s = state_of(comm);
  if (!s) return invalid("%s: invalid communicator", "CommFinalize");
  s->wait_quiet();
  return ncclSuccess;
}

ncclResult_t pncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  CommState* s = state_of(comm);
  if (!s) return invalid("%s: invalid communicator", "CommDestroy");
  // An init still waiting for peers gives up; queued work must finish (so
  // this hangs while a peer never arrives, like NCCL).
  if (s->status.load() == ncclInProgress) s->aborted.store(true);
  s->wait_quiet();
  profiler_comm_finalize(*s);
  s->detach();
  comm->dead.store(true);
  return ncclSuccess;
}

ncclResult_t pncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclSuccess;
  CommState* s = state_of(comm);
  if (!s) return invalid("%s: invalid communicator", "CommAbort");
  s->aborted.store(true);  // queued work ends at once, without moving data
  // The profiler plugin is finalized once the last op holding the communicator is gone
  // (~CommState): NCCL stops its proxy, which reports kernel channels, before finalizing it.
  s->detach();
  comm->dead.store(true);
  return ncclSuccess;
}

ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  CommState* s = state_of(comm);
  if (!s) return invalid("%s: invalid communicator", "CommRevoke");
  if (revokeFlags != NCCL_REVOKE_DEFAULT) return invalid("%s: flags must be 0", "CommRevoke");
  s->revoked.store(true);
  s->aborted.store(true);
  return ncclSuccess;
}

ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  if (!asyncError) return invalid("%s: asyncError is NULL", "CommGetAsyncError");
  if (comm && comm->magic == ncclComm::kMagic && comm->dead.load()) {
    *asyncError = ncclInvalidUsage;  // destroyed or aborted
    return ncclInvalidUsage;
  }
  CommState* s = state_of(comm);
  if (!s) return invalid("%s: invalid communicator", "CommGetAsyncError");
  *asyncError = s->status.load();
  return ncclSuccess;
}

ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) {
  CommState* s = state_of(comm);
  if (!s || !count) return invalid("%s: invalid arguments", "CommCount");
  *count = s->nranks;
  return ncclSuccess;
}

ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) {
  CommState* s = state_of(comm);
  if (!s || !rank) return invalid("%s: invalid arguments", "CommUserRank");
  *rank = s->rank;
  return ncclSuccess;
}

ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) {
  CommState* s = state_of(comm);
  if (!s || !device) return invalid("%s: invalid arguments", "CommCuDevice");
  *device = s->device;
  return ncclSuccess;
}

// NCCL 2.29.7's memory statistics (the enum is declared below when nccl.h is older). With
// HOSTNCCL_NO_MEMSTATS set it refuses, as a library without it leaves callers to other means.
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  CommState* s = state_of(comm);
  if (!s || !value) return invalid("%s: invalid arguments", "CommMemStats");
  if (getenv("HOSTNCCL_NO_MEMSTATS")) return invalid("%s: not available", "CommMemStats");
  std::lock_guard<std::mutex> g(s->mu);
  switch (stat) {
    case ncclStatGpuMemTotal: *value = uint64_t(s->device_bytes); break;
    case ncclStatGpuMemSuspend: *value = uint64_t(s->set_up_bytes); break;
    case ncclStatGpuMemSuspended: *value = s->suspended ? 1 : 0; break;
    case ncclStatGpuMemPersist: *value = uint64_t(s->device_bytes - s->set_up_bytes); break;
    default: return invalid("%s: unknown statistic", "CommMemStats");
  }
  return ncclSuccess;
}

// ------------------------------------------------------------------- memory

ncclResult_t pncclMemAlloc(void** ptr, size_t size) {
  if (!ptr) return invalid("%s: ptr is NULL", "MemAlloc");
  const size_t granule = 4096;
  size_t rounded = size == 0 ? granule : (size + granule - 1) / granule * granule;
  *ptr = aligned_alloc(granule, rounded);
  return *ptr ? ncclSuccess : ncclSystemError;
}

ncclResult_t pncclMemFree(void* ptr) {
  free(ptr);
  return ncclSuccess;
}

ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  CommState* s = state_of(comm);
  if (!s || !handle) return invalid("%s: invalid arguments", "CommRegister");
  auto* r = new Registration{buff, size};
  std::lock_guard<std::mutex> g(s->mu);
  s->registrations.insert(r);
  *handle = r;
  return ncclSuccess;
}

ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) {
  CommState* s = state_of(comm);
  if (!s) return invalid("%s: invalid communicator", "CommDeregister");
  if (!erase_from(*s, s->registrations, handle)) return invalid("%s: unknown handle", "CommDeregister");
  delete static_cast<Registration*>(handle);
  return ncclSuccess;
}

ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  CommState* s = state_of(comm);
  if (!s || !win) return invalid("%s: invalid arguments", "CommWindowRegister");
  auto* w = new ncclWindow_vidmem{buff, size, winFlags};
  std::lock_guard<std::mutex> g(s->mu);
  s->windows.insert(w);
  *win = w;
  return ncclSuccess;
}

ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  CommState* s = state_of(comm);
  if (!s) return invalid("%s: invalid communicator", "CommWindowDeregister");
  if (!erase_from(*s, s->windows, static_cast<void*>(win))) return invalid("%s: unknown window", "CommWindowDeregister");
  delete win;
  return ncclSuccess;
}

// ---------------------------------------------------------------- reductions

ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm) {
  CommState* s = state_of(comm);
  if (!s || !op || !scalar || type_size(datatype) == 0) return invalid("%s: invalid arguments", "RedOpCreatePreMulSum");
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return invalid("%s: invalid residence", "RedOpCreatePreMulSum");
  PreMulScalar p;
  p.type = datatype;
  p.residence = residence;
  p.ptr = scalar;
  memcpy(p.value, scalar, type_size(datatype));
  std::lock_guard<std::mutex> g(s->mu);
  int id = s->next_op++;
  s->premul_ops[id] = p;
  *op = ncclRedOp_t(id);
  return ncclSuccess;
}

ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  CommState* s = state_of(comm);
  if (!s) return invalid("%s: invalid communicator", "RedOpDestroy");
  if (!erase_from(*s, s->premul_ops, int(op))) return invalid("%s: not a PreMulSum op of this comm", "RedOpDestroy");
  return ncclSuccess;
}

// --------------------------------------------------------------- collectives

ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective("AllReduce", Kind::AllReduce, sendbuff, recvbuff, count, datatype, op, 0, comm, stream);
}

ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                            int root, ncclComm_t comm, cudaStream_t stream) {
  return collective("Broadcast", Kind::Broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, comm,
                    stream);
}

ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  return collective("Bcast", Kind::Broadcast, buff, buff, count, datatype, ncclSum, root, comm, stream);
}

ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                         ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return collective("Reduce", Kind::Reduce, sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                            ncclComm_t comm, cudaStream_t stream) {
  return collective("AllGather", Kind::AllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, comm,
                    stream);
}

ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collective("ReduceScatter", Kind::ReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, comm,
                    stream);
}

ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective("AlltoAll", Kind::AlltoAll, sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream);
}

ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                         ncclComm_t comm, cudaStream_t stream) {
  return collective("Gather", Kind::Gather, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                          ncclComm_t comm, cudaStream_t stream) {
  return collective("Scatter", Kind::Scatter, sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream);
}

// NCCL 2.29's suspend and resume: with NCCL_SUSPEND_MEM (1) a suspend gives back what the
// communicator's set-up took (NCCL's scratch buffers, made at first use); resume takes it again.
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags) {
  CommState* s = state_of(comm);
  if (!s) return invalid("%s: invalid communicator", "CommSuspend");
  if (flags & 1) s->suspend_memory(true);
  return ncclSuccess;
}
ncclResult_t pncclCommResume(ncclComm_t comm) {
  CommState* s = state_of(comm);
  if (!s) return invalid("%s: invalid communicator", "CommResume");
  s->suspend_memory(false);
  return ncclSuccess;
}
// Growing a communicator is not modelled: the stand-in refuses, as NCCL does a grow it cannot do.
ncclResult_t pncclCommGrow(ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t* newcomm, ncclConfig_t*) {
  if (newcomm) *newcomm = nullptr;
  return invalid("%s: not supported by the CPU stand-in", "CommGrow");
}
// One-sided signals: accepted on a valid communicator; the stand-in moves no data for them.
ncclResult_t pncclPutSignal(const void*, size_t, ncclDataType_t, int peer, ncclWindow_t, size_t, int, int, unsigned int,
                            ncclComm_t comm, cudaStream_t) {
  CommState* s = state_of(comm);
  if (!s || peer < 0 || peer >= s->nranks) return invalid("%s: invalid communicator or peer", "PutSignal");
  return ncclSuccess;
}
ncclResult_t pncclSignal(int peer, int, int, unsigned int, ncclComm_t comm, cudaStream_t) {
  CommState* s = state_of(comm);
  if (!s || peer < 0 || peer >= s->nranks) return invalid("%s: invalid communicator or peer", "Signal");
  return ncclSuccess;
}
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t*, ncclComm_t comm, cudaStream_t) {
  if (!state_of(comm) || nDesc < 0) return invalid("%s: invalid communicator or count", "WaitSignal");
  return ncclSuccess;
}

// The *Config variants (NCCL 2.31): the same collectives; a tuning config changes no result.
ncclResult_t pncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                  ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t*) {
  return pncclAllReduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
}
ncclResult_t pncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                  int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t*) {
  return pncclBroadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
}
ncclResult_t pncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                               ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t*) {
  return pncclReduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}
ncclResult_t pncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                  ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t*) {
  return pncclAllGather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
}
ncclResult_t pncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                      ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t*) {
  return pncclReduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}
ncclResult_t pncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                 ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t*) {
  return pncclAlltoAll(sendbuff, recvbuff, count, datatype, comm, stream);
}
ncclResult_t pncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t*) {
  return pncclGather(sendbuff, recvbuff, count, datatype, root, comm, stream);
}
ncclResult_t pncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t*) {
  return pncclScatter(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return collective("Send", Kind::Send, sendbuff, nullptr, count, datatype, ncclSum, peer, comm, stream);
}

ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                       cudaStream_t stream) {
  return collective("Recv", Kind::Recv, nullptr, recvbuff, count, datatype, ncclSum, peer, comm, stream);
}

// -------------------------------------------------------------------- groups

ncclResult_t pncclGroupStart() { return group_start(); }
ncclResult_t pncclGroupEnd() { return group_end(false); }
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t*) { return group_end(true); }

// ------------------------------------------------------------- device comms

ncclResult_t pncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                                struct ncclDevComm* outDevComm) {
  CommState* s = state_of(comm);
  if (!s || !reqs || !outDevComm) return invalid("%s: invalid arguments", "DevCommCreate");
  std::lock_guard<std::mutex> g(s->mu);
  s->devcomms.insert(outDevComm);
  return ncclSuccess;
}

ncclResult_t pncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm) {
  CommState* s = state_of(comm);
  if (!s) return invalid("%s: invalid communicator", "DevCommDestroy");
  if (!erase_from(*s, s->devcomms, static_cast<const void*>(devComm)))
    return invalid("%s: unknown device communicator", "DevCommDestroy");
  return ncclSuccess;
}

}  // extern "C"

// Weak nccl* aliases of the pnccl* definitions.
#define HOSTNCCL_ALIAS(name) \
  extern "C" __attribute__((weak, alias("p" #name))) decltype(p##name) name;

HOSTNCCL_ALIAS(ncclGetVersion)
HOSTNCCL_ALIAS(ncclGetUniqueId)
HOSTNCCL_ALIAS(ncclGetErrorString)
HOSTNCCL_ALIAS(ncclGetLastError)
HOSTNCCL_ALIAS(ncclCommInitRank)
HOSTNCCL_ALIAS(ncclCommInitRankConfig)
HOSTNCCL_ALIAS(ncclCommInitRankScalable)
HOSTNCCL_ALIAS(ncclCommInitAll)
HOSTNCCL_ALIAS(ncclCommSplit)
HOSTNCCL_ALIAS(ncclCommShrink)
HOSTNCCL_ALIAS(ncclCommFinalize)
HOSTNCCL_ALIAS(ncclCommDestroy)
HOSTNCCL_ALIAS(ncclCommAbort)
HOSTNCCL_ALIAS(ncclCommRevoke)
HOSTNCCL_ALIAS(ncclCommGetAsyncError)
HOSTNCCL_ALIAS(ncclCommCount)
HOSTNCCL_ALIAS(ncclCommUserRank)
HOSTNCCL_ALIAS(ncclCommCuDevice)
HOSTNCCL_ALIAS(ncclCommMemStats)
HOSTNCCL_ALIAS(ncclMemAlloc)
HOSTNCCL_ALIAS(ncclMemFree)
HOSTNCCL_ALIAS(ncclCommRegister)
HOSTNCCL_ALIAS(ncclCommDeregister)
HOSTNCCL_ALIAS(ncclCommWindowRegister)
HOSTNCCL_ALIAS(ncclCommWindowDeregister)
HOSTNCCL_ALIAS(ncclRedOpCreatePreMulSum)
HOSTNCCL_ALIAS(ncclRedOpDestroy)
HOSTNCCL_ALIAS(ncclAllReduce)
HOSTNCCL_ALIAS(ncclBroadcast)
HOSTNCCL_ALIAS(ncclBcast)
HOSTNCCL_ALIAS(ncclReduce)
HOSTNCCL_ALIAS(ncclAllGather)
HOSTNCCL_ALIAS(ncclReduceScatter)
HOSTNCCL_ALIAS(ncclAlltoAll)
HOSTNCCL_ALIAS(ncclGather)
HOSTNCCL_ALIAS(ncclScatter)
HOSTNCCL_ALIAS(ncclAllReduceConfig)
HOSTNCCL_ALIAS(ncclBroadcastConfig)
HOSTNCCL_ALIAS(ncclReduceConfig)
HOSTNCCL_ALIAS(ncclAllGatherConfig)
HOSTNCCL_ALIAS(ncclReduceScatterConfig)
HOSTNCCL_ALIAS(ncclAlltoAllConfig)
HOSTNCCL_ALIAS(ncclGatherConfig)
HOSTNCCL_ALIAS(ncclScatterConfig)
HOSTNCCL_ALIAS(ncclSend)
HOSTNCCL_ALIAS(ncclRecv)
HOSTNCCL_ALIAS(ncclGroupStart)
HOSTNCCL_ALIAS(ncclGroupEnd)
HOSTNCCL_ALIAS(ncclGroupSimulateEnd)
HOSTNCCL_ALIAS(ncclDevCommCreate)
HOSTNCCL_ALIAS(ncclDevCommDestroy)
HOSTNCCL_ALIAS(ncclCommSuspend)
HOSTNCCL_ALIAS(ncclCommResume)
HOSTNCCL_ALIAS(ncclCommGrow)
HOSTNCCL_ALIAS(ncclPutSignal)
HOSTNCCL_ALIAS(ncclSignal)
HOSTNCCL_ALIAS(ncclWaitSignal)
