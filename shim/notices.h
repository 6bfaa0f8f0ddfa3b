// What the shim says on stderr: each kind of trouble once per process, and a copy into the trace.
#pragma once

namespace ncclwatch {

enum class Notice {
  kNoNccl,
  kMissingFunction,
  kTraceOpenFailed,
  kTraceFull,
  kGpuTimingBehind,
  kNoCudaDriver,
  kInternalError,
  kTooManyLibraries,
  kDlsymUnavailable,
  kCount
};

// Prints `text` (one line, no trailing newline needed) the first time `kind` happens.
void notice_once(Notice kind, const char* text) noexcept;

// Forgets what was said (a forked child speaks for itself).
void reset_notices() noexcept;

}  // namespace ncclwatch
