// trace/ — this process's trace file (its format: common/ncclwatch/trace_format.h), written through
// a shared mapping, so a committed record survives a SIGKILL. Records of the history and the exit
// reserve (trace_writer.h); the ring of the newest ops and the totals of every op (op_ring.h); the
// communicator, stream and thread references that ring records name by index (trace_refs.h).
//
// May include: process/, comms/ (a communicator's track carries its trace index).
//
// Every header here is used outside the folder: this front door only gathers them.
#pragma once

#include "trace/op_ring.h"
#include "trace/trace_refs.h"
#include "trace/trace_writer.h"
