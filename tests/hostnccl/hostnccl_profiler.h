// The stand-in as a host of NCCL's profiler plugins (common/ncclwatch/nccl_profiler_abi.h), as
// NCCL 2.28+ is: it loads the library NCCL_PROFILER_PLUGIN names ("none": no plugin; unset:
// libnccl-profiler.so) once, takes its ncclProfiler_v6 or else ncclProfiler_v5, calls init for each
// communicator, starts a CollApi/P2pApi event inside each collective or send/recv call and a
// Coll/P2p event, its child, when the op is planned, with the algorithm and protocol it "chose",
// and finalize at destroy or abort. HOSTNCCL_PROFILER_VERSION=5 skips the v6 table;
// HOSTNCCL_PROFILER_HOSTILE=1 hands the plugin parents it never made (inside its handle, off by a
// byte, and outside it), as a broken NCCL might.
#pragma once

#include "hostnccl_ops.h"

namespace hostnccl {

struct CommState;

void profiler_comm_init(CommState& s);
void profiler_comm_finalize(CommState& s);
// Around the application's call: the API event's handle (nullptr: none), then its end.
void* profiler_api_start(CommState& s, const Op& op, CUstream stream);
void profiler_api_stop(void* handle);
// When the op is planned for launch (the call itself, or the group's end).
void profiler_op_planned(const Op& op);

}  // namespace hostnccl
