// Where an NCCL call came from: return addresses captured cheaply at the call (not symbolized:
// the analyzers do that offline from the kModule records), plus one short readable line for the
// exit alert, which must not symbolize at exit time.
#pragma once

#include "site/python_site.h"

#include <cstdint>

namespace ncclwatch {

struct CallSite {
  static constexpr int kMaxFrames = 64;
  uint64_t frames[kMaxFrames];
  int nframes = 0;
  char summary[192] = {};  // "function (module)" of the first frame outside the shim
  bool in_torch = false;   // some frame is inside PyTorch: the remedy names its API
  bool by_nvshmem = false; // NVSHMEM called NCCL (its own team communicators, released by nvshmem_finalize)
  char python[kMaxPythonFrames * 704 + 320] = {};  // python_site.h: the Python lines that led here ("" without Python)
};

// Captures up to `max_frames` frames above the shim (unwinding no deeper: unwinding costs about a
// microsecond per frame through an interpreter's stack) and writes kModule records for modules
// not seen before; with `python`, the Python lines too (python_site.h). Never throws.
void capture_call_site(CallSite& site, int max_frames, bool python = true) noexcept;

// Writes kModule records for the modules of `addresses` not described yet (so that the analyzers
// can symbolize them). Never from a signal handler.
void describe_modules_of(const uint64_t* addresses, int n) noexcept;

void callsite_after_fork_in_child() noexcept;

}  // namespace ncclwatch
