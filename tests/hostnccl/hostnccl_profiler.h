// The stand-in as a host of NCCL's profiler plugins (common/ncclwatch/nccl_profiler_abi.h), as
// NCCL 2.28+ is: it loads the library NCCL_PROFILER_PLUGIN names ("none": no plugin; unset:
// libnccl-profiler.so) once, takes its newest table (ncclProfiler_v7, _v6, _v5), calls init for each
// communicator, starts a CollApi/P2pApi event inside each collective or send/recv call and a
// Coll/P2p event, its child, when the op is planned, with the algorithm and protocol it "chose",
// a KernelCh event per channel around the op's execution on the stream's worker (NCCL's proxy
// thread reports those), timed by CLOCK_MONOTONIC for the GPU's timer, and finalize at destroy or
// abort. HOSTNCCL_PROFILER_VERSION=5 or 6 takes that table; HOSTNCCL_KERNEL_NS=N makes each op's
// "kernel" last N ns more (a known duration for the plugin to measure); HOSTNCCL_PROFILER_HOSTILE=1
// hands the plugin parents it never made (inside its handle, off by a byte, and outside it), as a
// broken NCCL might. With ProxyOp events asked for, each op's proxy operations come before its
// kernel channels: a send to the ring's next rank and a receive from its previous one per channel
// (send/recv: its peer), through each step's states; HOSTNCCL_SLOW_RANK=R with
// HOSTNCCL_PEER_WAIT_NS=N holds the ring up at rank R: every other rank's receives wait N ns.
#pragma once

#include "hostnccl_ops.h"

namespace hostnccl {

struct CommState;

void profiler_comm_init(CommState& s);
void profiler_comm_finalize(CommState& s);
// Around the application's call: the API event's handle (nullptr: none), then its end.
void* profiler_api_start(CommState& s, const Op& op, CUstream stream);
void profiler_api_stop(void* handle);
// When the op is planned for launch (the call itself, or the group's end): sets op.profiler_plan.
void profiler_op_planned(Op& op);
// Around the op's execution on the stream's worker: its kernel channels' KernelCh events, started
// by begin (which then waits out HOSTNCCL_KERNEL_NS) and stopped by end.
void profiler_kernel_begin(Op& op);
void profiler_kernel_end();

}  // namespace hostnccl
