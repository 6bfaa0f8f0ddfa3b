// What the shim says on stderr: each kind of trouble once per process, and a copy into the trace.
#pragma once

namespace ncclwatch {

// One kind per event, so one event's notice never silences another's.
enum class Notice {
  kNoNccl,
  kMissingFunction,
  kTraceOpenFailed,
  kTraceFull,
  kGpuTimingBehind,
  kNoCudaDriver,
  kCollectorFailed,
  kTooManyComms,
  kInternalError,
  kTooManyLibraries,
  kDlsymUnavailable,
  kMetricsWriteFailed,
  kMetricsFileRefused,
  kRingChunkFailed,
  kPythonSiteUnavailable,
  kOtherShimCopy,
  // Internal errors the shim swallows (it never throws into the application), each saying what
  // it cost.
  kResolveFailed,
  kLibraryLookupFailed,
  kCensusFailed,
  kLibraryRecordFailed,
  kAttachFailed,
  kTraceRefFailed,
  kOpTotalsFailed,
  kGpuTimingFailed,
  kGraphsLost,
  kStacksLost,
  kProgressLost,
  kStallReportFailed,
  kCallSiteFailed,
  kExecFailed,
  kTraceCapacityLimited,
  kStacksBudgetSpent,
  kProfilerStoodAside,
  kProfilerStopped,
  kProfilerChained,
  kProfilerChainMissedEvents,
  kCount
};

// Prints `text` (one line, no trailing newline needed) the first time `kind` happens, and copies
// it into the trace (but for the trace's own failures, which the trace cannot hold).
void notice_once(Notice kind, const char* text) noexcept;

// Where notices are copied (the trace writer registers write_notice_record: it reports its own
// failures through notices, so notices cannot depend on it).
void set_notice_recorder(void (*record)(const char* text) noexcept) noexcept;

// Prints a line on stderr and copies it into the trace, every time (notices about one object
// each, e.g. one per NCCL copy found).
void say(const char* text) noexcept;

// Forgets what was said (a forked child speaks for itself).
void notices_after_fork_in_child() noexcept;

}  // namespace ncclwatch
