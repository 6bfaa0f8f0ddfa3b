// Which NCCL copies this process holds, and which of them the trace covers. A preload sees only
// calls that pass through the dynamic linker; NCCL linked into another object, or bound inside it,
// is invisible. Rather than let an empty trace read as "no leaks", every copy found is written
// to the trace (kLibrary records) and the uncovered ones are said on stderr.
#pragma once

#include <string>
#include <string_view>

namespace ncclwatch {

struct RealNccl;

// Writes a kLibrary record for each attached library not yet written (once the process is
// attached; library_census_process_attached writes the ones found earlier).
void announce_libraries() noexcept;

// The process attached (its first NCCL call, exit_hooks.cc): libraries go to the trace from now.
void library_census_process_attached() noexcept;

// Finds NCCL copies the trace does not cover, writes each once to the trace (creating it if need
// be) and says the uncovered ones on stderr. `at_exit` also writes libnccl copies no call reached
// (before exit one may still be).
void report_untraced_nccl(bool at_exit) noexcept;

// At load: when a library loaded ahead of the shim takes NCCL's names (a libnccl earlier in
// LD_PRELOAD) and the program calls NCCL, the calls never reach the shim: said now, with the fix.
void report_nccl_ahead_of_shim_at_load() noexcept;

// The kLibrary record's strings (ncclwatch/trace_strings.h) for a library the shim's calls reach ...
std::string attached_library_strings(const RealNccl& lib);
// ... and for a copy they do not reach: `status` is library_record::kUnused or kNotTraced.
std::string unreached_library_strings(const std::string& path, int version, std::string_view status,
                                      const std::string& reason);

// In a forked child: its trace is new, so every library is written again.
void library_census_after_fork_in_child() noexcept;

}  // namespace ncclwatch
