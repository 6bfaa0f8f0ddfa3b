#include "resolver.h"

#include "library_census.h"
#include "notices.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace ncclwatch {

// Two slots may share one instance. The acquire load in real_nccl() pairs with the release store
// that published a slot.
std::atomic<const RealNccl*> detail::g_slots[kMaxLibraries];
thread_local uint8_t detail::t_bound_slot = 0;

namespace {

using detail::g_slots;
using detail::t_bound_slot;

std::mutex g_mutex;                  // guards g_libraries and the making of slots
// Distinct instances, in id order. Never destroyed: exit handlers read it after static destructors.
std::vector<RealNccl*>& g_libraries = *new std::vector<RealNccl*>();
// Load addresses of the objects that called dlsym for an NCCL function (g_mutex held to add).
std::atomic<const void*> g_dlsym_callers[16];
std::atomic<int> g_library_count{0};  // g_libraries.size(), readable without the lock

using DlsymFn = void* (*)(void*, const char*);

DlsymFn find_libc_dlsym() {
  // dlvsym is not interposed, so it reaches the C library; RTLD_NEXT from here skips the shim.
  // glibc 2.34 moved dlsym into libc under a new version; older ones have only the base version.
  for (const char* version : {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"})
    if (void* fn = dlvsym(RTLD_NEXT, "dlsym", version)) return reinterpret_cast<DlsymFn>(fn);
  return nullptr;
}

const void* shim_base() noexcept {
  static const void* base = [] {
    Dl_info info{};
    dladdr(reinterpret_cast<const void*>(&shim_base), &info);
    return static_cast<const void*>(info.dli_fbase);
  }();
  return base;
}

const void* object_base(const void* address) {
  Dl_info info{};
  return dladdr(address, &info) ? info.dli_fbase : nullptr;
}

bool is_nccl_library_name(const char* path) {
  const char* slash = std::strrchr(path, '/');
  const char* base = slash ? slash + 1 : path;
  return std::strncmp(base, "libnccl.so", 10) == 0;
}

// dl_iterate_phdr callback: the first loaded object named libnccl.so* that is not us.
int find_loaded_nccl(dl_phdr_info* info, size_t, void* out) {
  if (info->dlpi_name && is_nccl_library_name(info->dlpi_name)) {
    *static_cast<std::string*>(out) = info->dlpi_name;
    return 1;
  }
  return 0;
}

// A handle on the NCCL library already in the process, without loading a second copy; with
// `allow_load`, the standard name is loaded when none is (the program called NCCL, so it
// expects one).
void* open_default_nccl(bool allow_load) {
  if (void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD)) return h;
  std::string path;
  dl_iterate_phdr(find_loaded_nccl, &path);
  if (!path.empty()) {
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) return h;
  }
  // The global scope may know a copy under another name (e.g. NCCL linked into another library).
  if (void* sym = real_dlsym(RTLD_NEXT, "ncclGetVersion")) {
    Dl_info info{};
    if (dladdr(sym, &info) && info.dli_fname) {
      if (void* h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD)) return h;
    }
  }
  return allow_load ? dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL) : nullptr;
}

// `name` from the library at `base` (any library but the shim when base is null). pnccl* is
// NCCL's strong profiling alias: it can never resolve back to our ncclX.
void* lookup(void* handle, const char* name, const void* base, bool& used_alias) {
  auto belongs = [&](void* fn) { return fn && !is_inside_shim(fn) && (!base || object_base(fn) == base); };
  std::string alias = std::string("p") + name;
  void* fn = real_dlsym(handle, alias.c_str());
  if (belongs(fn)) {
    used_alias = true;
    return fn;
  }
  fn = real_dlsym(handle, name);
  return belongs(fn) ? fn : nullptr;
}

RealNccl* read_library(void* handle, const void* base) {
  auto* real = new RealNccl();  // lives for the rest of the process
  real->base = base;
  bool any_alias = false;
#define NCCLWATCH_API(group, name, since)                                                     \
  {                                                                                           \
    bool used_alias = false;                                                                  \
    real->name = reinterpret_cast<decltype(real->name)>(lookup(handle, #name, base, used_alias)); \
    any_alias |= used_alias;                                                                  \
    if (!real->name) real->missing.emplace_back(#name);                                       \
  }
#include "nccl_api.def"
#undef NCCLWATCH_API
  real->has_profiling_aliases = any_alias;

  const void* any_function = reinterpret_cast<const void*>(real->ncclGetVersion);
  if (!any_function) any_function = reinterpret_cast<const void*>(real->ncclCommInitRank);
  Dl_info info{};
  if (any_function && dladdr(any_function, &info)) {
    if (info.dli_fname) real->path = info.dli_fname;
    if (!real->base) real->base = info.dli_fbase;
  }
  int version = 0;
  if (real->ncclGetVersion && real->ncclGetVersion(&version) == ncclSuccess) real->version = version;
  return real;
}

// The known instance at `base`, if any (g_mutex held).
RealNccl* known_at(const void* base) {
  for (RealNccl* lib : g_libraries)
    if (lib->base == base) return lib;
  return nullptr;
}

// Keeps `fresh` as a new instance, or returns the known one at the same address (g_mutex held).
const RealNccl* remember(RealNccl* fresh, std::string reached) {
  if (RealNccl* known = known_at(fresh->base)) {
    delete fresh;
    return known;
  }
  fresh->library_id = static_cast<uint16_t>(g_libraries.size() + 1);
  fresh->reached = std::move(reached);
  g_libraries.push_back(fresh);
  g_library_count.store(static_cast<int>(g_libraries.size()), std::memory_order_relaxed);
  return fresh;
}

// Finds the default instance (g_mutex held); nullptr when no NCCL is at hand.
const RealNccl* resolve_default_locked(bool allow_load, const std::string& reached) {
  if (const RealNccl* real = g_slots[0].load(std::memory_order_relaxed)) return real;
  void* handle = open_default_nccl(allow_load);
  if (!handle) return nullptr;
  const RealNccl* real = remember(read_library(handle, nullptr), reached);
  g_slots[0].store(real, std::memory_order_release);
  return real;
}

std::string module_name(const void* address) {
  Dl_info info{};
  if (!address || !dladdr(address, &info) || !info.dli_fname || !info.dli_fname[0]) return "the main program";
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

void remember_dlsym_caller(const void* caller) {
  const void* base = object_base(caller);
  if (!base) return;
  for (auto& slot : g_dlsym_callers) {
    const void* known = slot.load(std::memory_order_relaxed);
    if (known == base) return;
    if (!known) {
      slot.store(base, std::memory_order_release);
      return;
    }
  }
}

}  // namespace

bool looked_up_nccl_through_dlsym(const void* object_base) noexcept {
  for (const auto& slot : g_dlsym_callers)
    if (slot.load(std::memory_order_acquire) == object_base) return true;
  return false;
}

void* real_dlsym_function() noexcept {
  static const DlsymFn fn = find_libc_dlsym();
  return reinterpret_cast<void*>(fn);
}

void* real_dlsym(void* handle, const char* name) noexcept {
  auto fn = reinterpret_cast<DlsymFn>(real_dlsym_function());
  return fn ? fn(handle, name) : nullptr;
}

const void* shim_load_address() noexcept { return shim_base(); }

bool is_inside_shim(const void* address) noexcept {
  Dl_info info{};
  return dladdr(address, &info) && info.dli_fbase == shim_base();
}

BoundSlotScope::BoundSlotScope(uint8_t slot) noexcept : previous_(t_bound_slot) { t_bound_slot = slot; }
BoundSlotScope::~BoundSlotScope() { t_bound_slot = previous_; }

const RealNccl* detail::resolve_default() noexcept {
  if (const RealNccl* real = g_slots[t_bound_slot].load(std::memory_order_acquire)) return real;
  const RealNccl* real = nullptr;
  try {
    std::lock_guard lock(g_mutex);
    real = resolve_default_locked(true, "global scope");
  } catch (...) {
  }
  if (!real) {
    notice_once(Notice::kNoNccl,
                "ncclwatch: no NCCL library is loaded in this process (looked for libnccl.so.2 and any "
                "libnccl.so*); NCCL calls are answered with ncclSystemError and nothing is traced");
    return nullptr;  // not cached: NCCL may still be loaded later
  }
  announce_libraries();
  return real;
}

uint16_t current_library_id() noexcept {
  const RealNccl* real = g_slots[t_bound_slot].load(std::memory_order_relaxed);
  return real ? real->library_id : 0;
}

int slot_for_library_of(const void* real_function, const void* caller) noexcept {
  int slot = -1;
  try {
    Dl_info info{};
    if (!dladdr(real_function, &info) || !info.dli_fname) return -1;
    std::string reached = "dlsym from " + module_name(caller);
    std::lock_guard lock(g_mutex);
    remember_dlsym_caller(caller);
    const RealNccl* default_instance = resolve_default_locked(false, reached);
    if (default_instance && default_instance->base == info.dli_fbase) slot = 0;
    for (int s = 1; s < kMaxLibraries && slot < 0; ++s) {
      const RealNccl* real = g_slots[s].load(std::memory_order_relaxed);
      if (real && real->base == info.dli_fbase) slot = s;
    }
    for (int s = 1; s < kMaxLibraries && slot < 0; ++s) {
      if (g_slots[s].load(std::memory_order_relaxed)) continue;
      void* handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
      if (!handle) return -1;
      g_slots[s].store(remember(read_library(handle, info.dli_fbase), reached), std::memory_order_release);
      slot = s;
    }
  } catch (...) {
    return -1;
  }
  if (slot < 0) {
    notice_once(Notice::kTooManyLibraries,
                "ncclwatch: more NCCL libraries than ncclwatch can tell apart were opened in this process; "
                "calls to the extra ones are not traced");
  }
  announce_libraries();
  return slot;
}

std::vector<const RealNccl*> known_libraries() {
  std::lock_guard lock(g_mutex);
  return {g_libraries.begin(), g_libraries.end()};
}

int library_count() noexcept { return g_library_count.load(std::memory_order_relaxed); }

const char* library_path(uint16_t id) noexcept {
  for (const auto& slot : g_slots) {
    const RealNccl* real = slot.load(std::memory_order_acquire);
    if (real && real->library_id == id) return real->path.c_str();
  }
  return "";
}

}  // namespace ncclwatch
