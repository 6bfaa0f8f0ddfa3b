// The model's front door: what the reports read.
//   job_files.h       a job's trace files, each opened once and read once across passes
//   job_read.h        the one pass over a job's files: inputs, clocks, the parallel read, the sinks
//   job_model.h       trace files read into processes, communicators, resources (trace_reader.h)
//   op_model.h        the ops of the whole job folded into seqs, arrivals and latencies
//   timed_ops.h       the one pairing of ops with their launches' GPU timings
//   findings.h        the analyses, typed: hang, stragglers, mismatches, latency (divergence.h)
//   lifecycle_findings.h, lateness_map.h, symbolizer.h, diagnostics.h
#pragma once

#include "model/diagnostics.h"
#include "model/findings.h"
#include "model/job_model.h"
#include "model/job_read.h"
#include "model/lateness_map.h"
#include "model/lifecycle_findings.h"
#include "model/op_model.h"
#include "model/symbolizer.h"
#include "model/timed_ops.h"
#include "model/trace_reader.h"
