// Finds the real NCCL behind the shim: once, lazily (at the first wrapped call, so NCCL may be
// loaded after our constructor), wherever it sits — linked directly, or inside a library opened
// RTLD_LOCAL (Python), where dlsym(RTLD_NEXT) sees nothing.
#pragma once

#include "nccl_api.h"

#include <string>
#include <vector>

namespace ncclwatch {

struct RealNccl {
  // One pointer per table entry, typed from nccl.h: a wrong entry fails to compile.
#define NCCLWATCH_API(group, name, since) decltype(&::name) name = nullptr;
#include "nccl_api.def"
#undef NCCLWATCH_API

  std::string path;                   // the library file the functions came from
  int version = 0;                    // ncclGetVersion's answer
  bool has_profiling_aliases = false; // pnccl* names found: forwarding to them never loops back
  std::vector<std::string> missing;   // table entries the library lacks
};

// The resolved library, or nullptr when no NCCL is loaded (said once on stderr). Thread-safe;
// after the first success it costs one acquire load.
const RealNccl* real_nccl() noexcept;

// True when `address` lies inside libncclwatch.so itself.
bool is_inside_shim(const void* address) noexcept;

}  // namespace ncclwatch
