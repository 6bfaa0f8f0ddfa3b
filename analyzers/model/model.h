// The model's front door: what the reports read, and a guide to the folder. Read it bottom up:
//
// 1. The bytes of one trace.
//      trace_image.h       a file's bytes in memory, read in extents (holes never read), a prefix first
//      trace_reader.h      every committed record of a file, torn and corrupt spans skipped and named
//      trace_text.h        text from traces made printable; python_frames.h, nccl_facts.h
// 2. One pass over a job: each file opened once, read once, in parallel.
//      job_inputs.h        the files a report reads (trace files, job folders, launcher folders)
//      job_files.h         a job's files, kept open across the passes a report makes
//      clock_align.h       every process on one clock, sampled from a bounded prefix of each file
//      job_read.h          read_job: the pass; each report's sinks receive each file's records
//      parallel_for.h      the reader threads
// 3. What the records become (sinks of the pass).
//      job_model.h         processes, communicators and resources with their end states (leaks),
//                          folded as the records stream by (lifecycle_fold.h)
//      timed_ops.h         the one pairing of ops with their launches' GPU timings
//      op_model.h          every op folded into seqs, arrivals, latencies (op_pass.cc: its sink of
//                          the pass; op_scanner.h: its loop per file; op_window.h: which part of
//                          the run a ring kept)
// 4. The analyses, typed: what every report prints the same way.
//      hang_analysis.h     who stopped where, mismatches, stragglers, divergence (divergence.h),
//                          settings that differ; rank_where.h: where a stuck rank's threads were
//      latency_analysis.h  time and bandwidth per communicator, op and size; latency_histogram.h
//      lifecycle_findings.h communicators piling up, resources outliving their communicator
//      lateness_map.h      the html heatmap's lateness per rank and seq
//      peer_links.h        what NCCL's proxy moved to and from each peer, and the peer others waited on
//      memory_findings.h   the GPU memory NCCL holds per process over the run, its peak
//      wording.h           communicators' names, ranks as "0,1,4-63", JSON text
// 5. Around them: symbolizer.h (call sites from return addresses), diagnostics.h (stderr).
#pragma once

#include "model/diagnostics.h"
#include "model/hang_analysis.h"
#include "model/job_model.h"
#include "model/job_read.h"
#include "model/latency_analysis.h"
#include "model/lateness_map.h"
#include "model/lifecycle_fold.h"
#include "model/lifecycle_findings.h"
#include "model/memory_findings.h"
#include "model/op_model.h"
#include "model/peer_links.h"
#include "model/settings_advice.h"
#include "model/symbolizer.h"
#include "model/timed_ops.h"
#include "model/trace_reader.h"
#include "model/wording.h"
