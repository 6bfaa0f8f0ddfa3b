// Which NCCL copies this process holds, and which of them the trace covers. A preload sees only
// calls that pass through the dynamic linker; NCCL linked into another object, or bound inside it,
// is invisible. Rather than let an empty trace read as "no leaks", every copy found is written
// to the trace (kLibrary records) and the uncovered ones are said on stderr.
#pragma once

#include <string>
#include <vector>

namespace ncclwatch {

// One object in the process that defines NCCL's API.
struct NcclCopy {
  std::string path;
  const void* base = nullptr;
  int version = 0;              // from NCCL's banner in it (0 unknown; not read for a libnccl)
  bool exported = false;        // in its dynamic symbol table
  bool binds_own_calls = false; // its own calls to NCCL never reach the dynamic linker
  bool named_libnccl = false;   // a libnccl.so* of its own, not NCCL inside another object
};

// Every loaded object that defines NCCL's API (the shim aside). Reads the files' static symbol
// tables too, for NCCL linked in with hidden symbols.
std::vector<NcclCopy> find_nccl_copies();

// Writes a kLibrary record for each attached library not yet written (once the process is
// attached; attach_process writes the ones found earlier).
void announce_libraries() noexcept;

// Finds NCCL copies the trace does not cover, writes each once to the trace (creating it if need
// be) and says the uncovered ones on stderr. `at_exit` also writes libnccl copies no call reached
// (before exit one may still be). Returns how many copies are not traced.
int report_untraced_nccl(bool at_exit) noexcept;

// In a forked child: its trace is new, so every library is written again.
void library_census_after_fork() noexcept;

}  // namespace ncclwatch
