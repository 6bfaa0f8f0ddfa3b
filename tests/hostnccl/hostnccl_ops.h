// Operations of the NCCL stand-in: what a host call queues on its stream,
// and the group that holds calls until ncclGroupEnd.
#pragma once

#include "hostnccl_comm.h"

#include <cuda.h>

#include <memory>
#include <vector>

namespace hostnccl {

enum class Kind { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter,
                  Send, Recv, Group };

struct RedOp {
  ncclRedOp_t base = ncclSum;  // built-in op; PreMulSum runs as a sum
  bool premul = false;
  PreMulScalar scalar;
};

struct Op {
  Kind kind = Kind::AllReduce;
  std::shared_ptr<CommState> comm;
  uint64_t seq = 0;  // taken when the op is instantiated on a stream
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclInt8;
  RedOp red;
  int root = 0;  // root, or the peer of Send/Recv
  std::vector<Op> members;  // Kind::Group: the ops of one stream in one group
  void* profiler_api = nullptr;  // the profiler plugin's handle of the call's API event (hostnccl_profiler.h)
  void* profiler_plan = nullptr; // ... of its Coll/P2p event, the parent of its kernel channels' events
  uint8_t channels = 0;          // the channels the stand-in "planned" it on
};

// Queues op on stream, or holds it while a group is open.
ncclResult_t submit(Op op, CUstream stream);

ncclResult_t group_start();
// Outermost end: waits for inits started inside the group (blocking comms),
// then queues the held ops, one combined item per stream. simulate: drop them.
ncclResult_t group_end(bool simulate);
bool in_group();
// An init started inside a group: group_end waits for it.
void group_defer_init(std::shared_ptr<CommState> s);

// Runs on the stream worker.
void execute(Op& op);

}  // namespace hostnccl
