// profiler/ — the shim as NCCL's profiler plugin (NCCLWATCH_PROFILER=1, NCCL >= 2.28): NCCL tells it
// what it planned for each op (algorithm, protocol, channels), which becomes an OpPlan record tied
// to the op the wrapper recorded (t_thread.issuing, set by wrap/collectives.cc around each call),
// and when each channel of the op's kernel ran by the GPU's timer (OpKernel records).
//
// May include: process/, comms/ (the op's communicator), resolve/ (the loaded NCCL's version), trace/ (OpPlan and
// OpKernel records).
#pragma once

#include "profiler/profiler_plugin.h"
