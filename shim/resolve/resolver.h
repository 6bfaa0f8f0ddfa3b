// Finds the real NCCL libraries behind the shim. A process may hold several (PyTorch's wheel NCCL
// beside one opened by ctypes or by XLA's plugin); each is an instance with its own table.
//
// Calls reach an instance in one of two ways:
//   - through the global scope: the application calls ncclX, the dynamic linker binds it to our
//     export. That goes to the default instance, found lazily at the first such call (NCCL may be
//     loaded after our constructor), wherever it sits: linked directly, or inside a library opened
//     RTLD_LOCAL (Python), where dlsym(RTLD_NEXT) sees nothing.
//   - through dlsym(handle, "ncclX") (ctypes, XLA, NVSHMEM): the caller gets a wrapper bound to the
//     library that dlsym found (dlsym_hook.cc, bound_wrappers.h).
#pragma once

#include "process/process.h"
#include "resolve/nccl_api.h"

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace ncclwatch {

struct RealNccl {
  // One pointer per table entry, typed from nccl.h: a wrong entry fails to compile.
#define NCCLWATCH_API(group, name, since) decltype(&::name) name = nullptr;
#include <ncclwatch/nccl_api.def>
#undef NCCLWATCH_API

  std::string path;                   // the library file the functions came from
  int version = 0;                    // ncclGetVersion's answer
  bool has_profiling_aliases = false; // pnccl* names found: forwarding to them never loops back
  std::vector<std::string> missing;   // table entries the library lacks
  const void* base = nullptr;         // its load address: tells two copies apart
  uint16_t library_id = 0;            // 1, 2, ... in the order libraries were found; names it in the trace
  std::string reached;                // how calls reach it: "global scope" or "dlsym from <module>"
};

// Most libraries one process can hold: the default instance and the rest, one slot each.
inline constexpr int kMaxLibraries = 8;

namespace detail {
// Slot 0 is the default instance (calls through the global scope); slots 1.. serve libraries
// reached only through dlsym. A slot, once set, never changes.
extern std::atomic<const RealNccl*> g_slots[kMaxLibraries];
// Finds the default instance: the NCCL that `caller` (the application's return address) would
// have reached without the shim.
const RealNccl* resolve_default(const void* caller) noexcept;
}  // namespace detail

// The instance the current call is bound to: the one of the dlsym'd wrapper being run, else the
// default instance; nullptr when no NCCL is loaded (said once on stderr). Thread-safe; after the
// first success it costs one thread-local and one acquire load, inline (the hot path). Always
// inlined into the exported wrapper, so __builtin_return_address(0) is the application's call.
__attribute__((always_inline)) inline const RealNccl* real_nccl() noexcept {
  // Pairs with the release stores that publish a slot.
  if (const RealNccl* real = detail::g_slots[t_thread.bound_slot].load(std::memory_order_acquire)) return real;
  return detail::resolve_default(__builtin_return_address(0));
}

// The trace's id of the library serving the current call (0 when none is resolved).
uint16_t current_library_id() noexcept;

// The slot of the library that defines `real_function` (found by dlsym in some library), made
// on first sight; -1 when it cannot be served (say once why). `caller` is the address dlsym was
// called from, to name who reached the library.
int slot_for_library_of(const void* real_function, const void* caller) noexcept;

// True when slot `slot`'s library has `name` and it lies in the object where dlsym `found` it:
// only then may dlsym hand out the slot's wrapper.
bool slot_serves(int slot, const char* name, const void* found) noexcept;

// In a forked child: the resolver's lock may have been held by a thread that is gone.
void resolver_after_fork_in_child() noexcept;

// Marks the calling thread as running a wrapper bound to `slot` for the scope's lifetime.
class BoundSlotScope {
 public:
  explicit BoundSlotScope(uint8_t slot) noexcept;
  ~BoundSlotScope();
  BoundSlotScope(const BoundSlotScope&) = delete;
  BoundSlotScope& operator=(const BoundSlotScope&) = delete;

 private:
  uint8_t previous_;
};

// True when the object loaded at `object_base` looked NCCL up through dlsym: it reaches a traced
// library, and any functions of NCCL's names it defines are its forwarding stubs (XLA's).
bool looked_up_nccl_through_dlsym(const void* object_base) noexcept;

// Every distinct library instance found so far, in id order.
std::vector<const RealNccl*> known_libraries();

// Called after a library joins the known ones (the census writes it to the trace; it registers
// itself, as it depends on this file).
void set_library_added_hook(void (*hook)() noexcept) noexcept;

// How many distinct libraries were found (allocation-free, for the exit alert).
int library_count() noexcept;

// The path of library `id`, or "" (allocation-free, for the exit alert).
const char* library_path(uint16_t id) noexcept;

// Sanitizer runtimes look their interceptors up through dlsym before their shadow memory exists:
// whatever dlsym runs for a name that is not NCCL's must not be instrumented.
#define NCCLWATCH_UNINSTRUMENTED __attribute__((no_sanitize("address", "thread", "undefined")))

// The C library's own dlsym: the shim exports a dlsym of its own (dlsym_hook.cc), so the shim's
// lookups must not go through that name.
void* real_dlsym(void* handle, const char* name) noexcept;
// Its address (for dlsym_hook.cc's jump), nullptr if it could not be found.
void* real_dlsym_function() noexcept;

// Where libncclwatch.so is loaded (dladdr's dli_fbase).
const void* shim_load_address() noexcept;

// Whether the shim's exports are in the process's global scope (preloaded, or opened with
// RTLD_GLOBAL). A copy opened locally (NCCL opening it as its profiler plugin, in a child that
// inherited NCCL_PROFILER_PLUGIN but not LD_PRELOAD) sees no call and must stay silent.
bool shim_in_global_scope() noexcept;

// True when the file name of `path` is libnccl.so*: a library of its own, not NCCL inside another.
bool is_nccl_library_name(const char* path) noexcept;

// True when `address` lies inside libncclwatch.so itself.
bool is_inside_shim(const void* address) noexcept;

// True when another copy of the shim was loaded before this one: that one traces, this one only
// forwards (two copies would record every call twice).
bool another_shim_copy_traces() noexcept;

}  // namespace ncclwatch
