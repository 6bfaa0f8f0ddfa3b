// NCCL's profiler-plugin interface, versions 5 (NCCL 2.28), 6 (2.29, copy-engine collectives) and 7
// (2.31, a user tag per call, kernel variants and phases): the binary layout NCCL calls through,
// declared here for the shim's plugin entry and the CPU stand-in that loads it. NCCL finds a plugin
// by dlopen (NCCL_PROFILER_PLUGIN: a path, or a name X for libnccl-profiler-X.so; "none" disables)
// and looks up the newest table it knows first: `ncclProfiler_v7`, `ncclProfiler_v6`, then
// `ncclProfiler_v5`. Only the members the shim reads are named in full; the rest keep their place
// in the layout. Each version extends the last one's descriptors at their ends (v6: a member of the
// union; v7: members after the last of collApi, p2pApi, coll, p2p and ceColl, and a kernelPhase
// event the shim never asks for), so one set of callbacks serves all three: every member read here
// sits where it sat in version 5. The event states the shim reads keep their values too.
#pragma once

#include <nccl.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace ncclwatch::profiler_abi {

// Event types, the bits of the activation mask the plugin's init returns.
enum EventType : uint64_t {
  kGroup = 1 << 0,         // the group of ops one kernel launch runs
  kColl = 1 << 1,          // a collective as NCCL planned it: algorithm, protocol, channels
  kP2p = 1 << 2,           // a send or receive as planned
  kProxyOp = 1 << 3,       // a proxy operation per channel and peer
  kProxyStep = 1 << 4,     // one step of it
  kProxyCtrl = 1 << 5,
  kKernelCh = 1 << 6,      // one channel of the kernel, with GPU timestamps
  kNetPlugin = 1 << 7,
  kGroupApi = 1 << 8,      // the application's ncclGroupStart/End
  kCollApi = 1 << 9,       // the application's collective call, on its thread
  kP2pApi = 1 << 10,       // the application's ncclSend/ncclRecv call
  kKernelLaunch = 1 << 11,
  kCeColl = 1 << 12,       // v6: a copy-engine collective
  kCeSync = 1 << 13,
  kCeBatch = 1 << 14,
  kKernelPhase = 1 << 15,  // v7: a kernel channel's barrier phases
};

// recordEventState states the shim reads.
enum EventState : int {
  // A network proxy step's progress (its transSize in the state args): a send step waits for the
  // GPU's data, then for the peer's buffer, then for the network; a receive step for the peer's
  // data, then for the flush, then for the GPU to take it. The step starts when NCCL posts it and
  // stops when it is done.
  kProxyStepSendGPUWait = 8,
  kProxyStepSendWait = 9,
  kProxyStepRecvWait = 10,
  kProxyStepRecvFlushWait = 11,
  kProxyStepRecvGPUWait = 12,
  kProxyStepSendPeerWait = 20,  // "_v4" in NCCL's header, and still sent by 2.28-2.30
  kKernelChStop = 22,  // a kernel channel finished: its stop timestamp in the state args
};

// The members of the event descriptor's union, one per event type (named types: an anonymous
// union may hold only data members).
struct GroupApiDescr {
  bool graphCaptured;
  int groupDepth;
};

struct CollApiDescr {
  const char* func;
  size_t count;
  const char* datatype;
  int root;
  void* stream;
  bool graphCaptured;
};

struct P2pApiDescr {
  const char* func;
  size_t count;
  const char* datatype;
  void* stream;
  bool graphCaptured;
};

struct KernelLaunchDescr {
  void* stream;
};

struct CollDescr {
  uint64_t seqNumber;  // NCCL's count of earlier collectives of this func on the communicator
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  uint8_t nChannels;
  uint8_t nWarps;
  const char* algo;   // "RING", "TREE", "NVLS", "PAT", ...
  const char* proto;  // "LL", "LL128", "SIMPLE"
  void* parentGroup;
};

struct P2pDescr {
  const char* func;
  void* buff;
  const char* datatype;
  size_t count;
  int peer;
  uint8_t nChannels;
  void* parentGroup;
};

struct ProxyOpDescr {
  pid_t pid;
  uint8_t channelId;
  int peer;
  int nSteps;
  int chunkSize;
  int isSend;
};

struct ProxyStepDescr {
  int step;
};

struct KernelChDescr {
  uint8_t channelId;
  uint64_t pTimer;  // the channel's start, GPU global timer (ns)
};

struct NetPluginDescr {
  int64_t id;
  void* data;
};

struct CeCollDescr {
  uint64_t seqNumber;
  const char* func;
  const void* sendBuff;
  void* recvBuff;
  size_t count;
  int root;
  const char* datatype;
  const char* syncStrategy;
  bool intraBatchSync;
  uint32_t batchSize;
  uint32_t numBatches;
  uint32_t ceSeqNum;
  void* stream;
};

struct EventDescr {
  uint64_t type;    // one EventType
  void* parentObj;  // the handle this plugin returned for the parent event (Coll: its CollApi event)
  int rank;
  union {
    GroupApiDescr groupApi;
    CollApiDescr collApi;
    P2pApiDescr p2pApi;
    KernelLaunchDescr kernelLaunch;
    CollDescr coll;
    P2pDescr p2p;
    ProxyOpDescr proxyOp;
    ProxyStepDescr proxyStep;
    KernelChDescr kernelCh;
    NetPluginDescr netPlugin;
    // v6 only from here: the largest member, so the union is as large as NCCL's.
    CeCollDescr ceColl;
  };
};

// The members of recordEventState's arguments.
struct ProxyStepState {
  size_t transSize;
};

struct ProxyCtrlState {
  int appendedProxyOps;
};

struct NetPluginState {
  void* data;
};

struct KernelChState {
  uint64_t pTimer;  // kKernelChStop: the channel's end, GPU global timer (ns)
};

union EventStateArgs {
  ProxyStepState proxyStep;
  ProxyCtrlState proxyCtrl;
  NetPluginState netPlugin;
  KernelChState kernelCh;
};

// ncclDebugLogger_t: NCCL's logger, handed to init.
using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// ncclProfiler_v5_t and ncclProfiler_v6_t: the same five entries (v6's descriptor is v5's, extended).
struct Plugin {
  const char* name;
  ncclResult_t (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes,
                       int nranks, int rank, DebugLogger logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, EventDescr* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, int eState, EventStateArgs* eStateArgs);
  ncclResult_t (*finalize)(void* context);
};

// The layout NCCL compiles against (x86-64 and aarch64 Linux): a change here is an ABI break.
static_assert(offsetof(EventDescr, coll) == 24);
static_assert(offsetof(EventDescr, coll.algo) == 24 + 64 && offsetof(EventDescr, coll.nChannels) == 24 + 56);
static_assert(offsetof(EventDescr, kernelCh.pTimer) == 24 + 8);
static_assert(sizeof(EventDescr) == 24 + 88);
static_assert(sizeof(EventStateArgs) == 8);

}  // namespace ncclwatch::profiler_abi
