// NCCL's API as the shim sees it: nccl.h plus the device-communicator entry points, whose
// header (nccl_device.h) needs a CUDA compiler; their arguments are opaque pointers to us.
#pragma once

#include <nccl.h>

#include <cstdint>

extern "C" {
struct ncclDevComm;
struct ncclDevCommRequirements;
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                               struct ncclDevComm* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm);
}

// NCCL 2.29.7's memory statistics, when the headers at hand are older.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 7)
extern "C" {
typedef enum {
  ncclStatGpuMemSuspend = 0,
  ncclStatGpuMemSuspended = 1,
  ncclStatGpuMemPersist = 2,
  ncclStatGpuMemTotal = 3
} ncclCommMemStat_t;
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
}
#endif

// NCCL 2.31 added *Config variants of the collectives, taking a per-call ncclCollConfig_t (opaque
// to the shim). Declared here when the headers at hand are older.
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 31, 0)
extern "C" {
struct ncclwatchCollConfig;
typedef struct ncclwatchCollConfig ncclCollConfig_t;
ncclResult_t ncclAllReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                 ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclBroadcastConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                 ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclReduceConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                              ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream,
                              const ncclCollConfig_t* config);
ncclResult_t ncclAllGatherConfig(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                 ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclReduceScatterConfig(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                     ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
                                     const ncclCollConfig_t* config);
ncclResult_t ncclAlltoAllConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclGatherConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                              ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
ncclResult_t ncclScatterConfig(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config);
}
#endif

// NCCL 2.29 added growing a communicator, suspending and resuming one, and one-sided signals on
// registered windows. Declared here when the headers at hand are older; the signal descriptor
// is opaque to the shim (it passes the pointer on).
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 0)
extern "C" {
struct ncclwatchWaitSignalDesc;
typedef struct ncclwatchWaitSignalDesc ncclWaitSignalDesc_t;
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                          ncclConfig_t* config);
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer, ncclWindow_t peerWin,
                           size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm, cudaStream_t stream);
}
#endif

// Only NCCL names leave the library (see libncclwatch.map).
#define NCCLWATCH_EXPORT extern "C" __attribute__((visibility("default")))
