// Wrappers bound to one NCCL library, for callers that reach NCCL through dlsym(handle, "ncclX")
// rather than through the global scope. Each is a trampoline: it marks the thread as serving its
// library's slot (resolver.h), then runs the shim's ordinary wrapper, whose real_nccl() then
// answers with that library. One table per slot, built at compile time from the API table (common/ncclwatch/nccl_api.def).
#pragma once

namespace ncclwatch {

// The wrapper of API function `name` bound to library slot `slot`, or nullptr when the shim
// does not wrap `name` (queries, unknown names).
void* bound_wrapper(int slot, const char* name) noexcept;

}  // namespace ncclwatch
