#include "resolve/resolver.h"

#include "process/process.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace ncclwatch {

// Two slots may share one instance. The acquire load in real_nccl() pairs with the release store
// that published a slot.
std::atomic<const RealNccl*> detail::g_slots[kMaxLibraries];

namespace {

std::atomic<void (*)() noexcept> g_library_added{nullptr};

void library_added() {
  if (auto hook = g_library_added.load(std::memory_order_acquire)) hook();
}

using detail::g_slots;

// Guards libraries() and the publishing of slots. Never held across a call into the loader or a
// library: a dlopen in another thread may run a constructor that calls our dlsym.
std::mutex g_mutex;

// Distinct instances, in id order. Built at first use (a constructor of the application's may
// call dlsym before ours run) and never destroyed (exit handlers read it).
std::vector<RealNccl*>& libraries() {
  static auto* list = new std::vector<RealNccl*>();
  return *list;
}
// Load addresses of the objects that called dlsym for an NCCL function.
std::atomic<const void*> g_dlsym_callers[16];
std::atomic<int> g_library_count{0};  // libraries().size(), readable without the lock

using DlsymFn = void* (*)(void*, const char*);
// Read and written with __atomic builtins: std::atomic's members may not be inlined into an
// uninstrumented caller.
DlsymFn g_libc_dlsym = nullptr;

NCCLWATCH_UNINSTRUMENTED DlsymFn find_libc_dlsym() {
  // dlvsym is not interposed, so it reaches the C library; RTLD_NEXT from here skips the shim.
  // The architecture's base version exists in every glibc (2.34 keeps it beside its new one), so
  // the first lookup succeeds: a failed one would allocate its error message, and a malloc
  // interposer calling dlsym from malloc would come back here.
#if defined(__x86_64__)
  const char* versions[] = {"GLIBC_2.2.5", "GLIBC_2.34"};
#else
  const char* versions[] = {"GLIBC_2.17", "GLIBC_2.34"};
#endif
  for (const char* version : versions)
    if (void* fn = dlvsym(RTLD_NEXT, "dlsym", version)) return reinterpret_cast<DlsymFn>(fn);
  return nullptr;
}

// Before any other constructor of ours (and most of the application's) can call dlsym.
__attribute__((constructor(101))) void find_libc_dlsym_early() { real_dlsym_function(); }

const void* object_base(const void* address) {
  Dl_info info{};
  return dladdr(address, &info) ? info.dli_fbase : nullptr;
}

const void* shim_base() noexcept {
  static const void* base = object_base(reinterpret_cast<const void*>(&shim_base));
  return base;
}

// --- Another copy of the shim ------------------------------------------------------------------
// Two builds of the shim preloaded at once (two paths in LD_PRELOAD, a job script adding its own)
// must not both trace: each would take the other for NCCL, record every call twice and alert
// twice. A copy is known by what no NCCL exports: `dlsym` defined beside the NCCL names.

bool is_shim_copy_object(const char* path, const void* base) {
  if (!path || !path[0]) return false;  // the main program
  void* handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (!handle) return false;
  void* nccl_name = real_dlsym(handle, "ncclCommInitRank");
  void* hook = real_dlsym(handle, "dlsym");
  dlclose(handle);  // NOLOAD took a reference: give it back
  return nccl_name && hook && object_base(nccl_name) == base && object_base(hook) == base;
}

bool is_other_shim_copy(const void* address) {
  Dl_info info{};
  return address && !is_inside_shim(address) && dladdr(address, &info) && is_shim_copy_object(info.dli_fname, info.dli_fbase);
}

void say_other_copy_skipped(const void* address) {
  Dl_info theirs{}, ours{};
  dladdr(address, &theirs);
  dladdr(reinterpret_cast<const void*>(&say_other_copy_skipped), &ours);
  std::string text = std::string("ncclwatch: another copy of the shim is loaded (") +
                     (theirs.dli_fname ? theirs.dli_fname : "?") + "); only this one (" +
                     (ours.dli_fname ? ours.dli_fname : "?") + ") traces, the other only forwards";
  notice_once(Notice::kOtherShimCopy, text.c_str());
}

// dl_iterate_phdr callback: every loaded object with a file, in load order. It only collects: a
// dlopen here would wait for the loader's lock while holding the list's, against a dlopen in
// another thread that holds the first and waits for the second (a deadlock, found by a test).
int list_loaded_objects(dl_phdr_info* info, size_t, void* out) {
  if (info->dlpi_name && info->dlpi_name[0])
    static_cast<std::vector<std::pair<std::string, const void*>>*>(out)->emplace_back(
        info->dlpi_name, reinterpret_cast<const void*>(info->dlpi_addr));
  return 0;
}

// dl_iterate_phdr callback: the first loaded object named libnccl.so* that is not us.
int find_loaded_nccl(dl_phdr_info* info, size_t, void* out) {
  if (info->dlpi_name && is_nccl_library_name(info->dlpi_name)) {
    *static_cast<std::string*>(out) = info->dlpi_name;
    return 1;
  }
  return 0;
}

// An NCCL library: a handle on it and, when known, where it is loaded (its functions must all
// come from there).
struct Opened {
  void* handle = nullptr;
  const void* base = nullptr;
  explicit operator bool() const { return handle != nullptr; }
};

// The object, other than the shim, that defines `name` as seen from `handle`'s scope.
Opened open_definer(void* handle, const char* name) {
  void* sym = real_dlsym(handle, name);
  Dl_info info{};
  if (!sym || is_inside_shim(sym) || !dladdr(sym, &info) || !info.dli_fname) return {};
  if (is_shim_copy_object(info.dli_fname, info.dli_fbase)) {
    say_other_copy_skipped(sym);
    return {};
  }
  return {dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD), info.dli_fbase};
}

// A handle on the NCCL that the first caller of an exported function would have reached
// without the shim, never loading a second copy; with `allow_load`, the standard name is loaded
// when none is (the program called NCCL, so it expects one). The dynamic linker's order:
//   1. the global scope after the shim (RTLD_NEXT);
//   2. the caller's own scope: under Python, NCCL sits in an RTLD_LOCAL scope where RTLD_NEXT
//      finds nothing, and an object may carry its own copy;
//   3. any loaded libnccl, by name (a caller of unknown scope: dlsym'd wrappers, the shim).
Opened open_default_nccl(bool allow_load, const void* caller) {
  if (Opened global = open_definer(RTLD_NEXT, "ncclCommInitRank")) return global;
  Dl_info info{};
  if (caller && !is_inside_shim(caller) && dladdr(caller, &info) && info.dli_fname && info.dli_fname[0]) {
    if (void* scope = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD)) {
      if (Opened own = open_definer(scope, "ncclCommInitRank")) return own;
    }
  }
  if (void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD)) return {h, nullptr};
  std::string path;
  dl_iterate_phdr(find_loaded_nccl, &path);
  if (!path.empty()) {
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) return {h, nullptr};
  }
  return {allow_load ? dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL) : nullptr, nullptr};
}

// `name` from the library at `base` (any library but the shim when base is null). pnccl* is
// NCCL's strong profiling alias: it can never resolve back to our ncclX.
void* lookup(void* handle, const char* name, const void* base, bool& used_alias) {
  auto belongs = [&](void* fn) {
    return fn && !is_inside_shim(fn) && (!base || object_base(fn) == base) && !is_other_shim_copy(fn);
  };
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
#include <ncclwatch/nccl_api.def>
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
  for (RealNccl* lib : libraries())
    if (lib->base == base) return lib;
  return nullptr;
}

// Keeps `fresh` as a new instance, or returns the known one at the same address (g_mutex held).
const RealNccl* remember(RealNccl* fresh, std::string reached) {
  if (RealNccl* known = known_at(fresh->base)) {
    delete fresh;
    return known;
  }
  fresh->library_id = static_cast<uint16_t>(libraries().size() + 1);
  fresh->reached = std::move(reached);
  libraries().push_back(fresh);
  g_library_count.store(static_cast<int>(libraries().size()), std::memory_order_relaxed);
  return fresh;
}

// Puts `fresh` into `slot` unless another thread filled it first; returns what the slot holds
// (g_mutex held).
const RealNccl* publish(int slot, RealNccl* fresh, std::string reached) {
  if (const RealNccl* there = g_slots[slot].load(std::memory_order_relaxed)) {
    delete fresh;
    return there;
  }
  const RealNccl* kept = remember(fresh, std::move(reached));
  g_slots[slot].store(kept, std::memory_order_release);
  return kept;
}

// The default instance, found on first use; nullptr when no NCCL is at hand. The library is read
// with no lock held (that calls the loader and the library); threads racing here keep one answer.
const RealNccl* default_instance(bool allow_load, const void* caller, const std::string& reached) {
  if (const RealNccl* real = g_slots[0].load(std::memory_order_acquire)) return real;
  Opened nccl = open_default_nccl(allow_load, caller);
  if (!nccl) return nullptr;
  RealNccl* fresh = read_library(nccl.handle, nccl.base);
  std::lock_guard lock(g_mutex);
  return publish(0, fresh, reached);
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
    const void* known = nullptr;
    // Claims the first free entry, or stops at this caller's own.
    if (slot.compare_exchange_strong(known, base, std::memory_order_acq_rel) || known == base) return;
  }
}

}  // namespace

bool looked_up_nccl_through_dlsym(const void* object_base) noexcept {
  for (const auto& slot : g_dlsym_callers)
    if (slot.load(std::memory_order_acquire) == object_base) return true;
  return false;
}

bool is_nccl_library_name(const char* path) noexcept {
  const char* slash = std::strrchr(path, '/');
  const char* base = slash ? slash + 1 : path;
  return std::strncmp(base, "libnccl.so", 10) == 0;
}

NCCLWATCH_UNINSTRUMENTED void* real_dlsym_function() noexcept {
  // No function-local static: its guard would deadlock a thread that re-enters while resolving.
  // Two threads resolving at once find the same function.
  DlsymFn fn = __atomic_load_n(&g_libc_dlsym, __ATOMIC_ACQUIRE);
  if (!fn) {
    fn = find_libc_dlsym();
    __atomic_store_n(&g_libc_dlsym, fn, __ATOMIC_RELEASE);
  }
  return reinterpret_cast<void*>(fn);
}

void* real_dlsym(void* handle, const char* name) noexcept {
  auto fn = reinterpret_cast<DlsymFn>(real_dlsym_function());
  return fn ? fn(handle, name) : nullptr;
}

const void* shim_load_address() noexcept { return shim_base(); }

bool shim_in_global_scope() noexcept {
  // Through the program's handle, whose lookups search the global scope (RTLD_DEFAULT would search
  // the caller's scope, which holds this copy however it was opened), for a name NCCL never
  // exports: ours or none.
  void* program = dlopen(nullptr, RTLD_NOW | RTLD_NOLOAD);
  if (!program) return true;  // cannot tell: as preloaded
  void* found = real_dlsym(program, "ncclProfiler_v6");
  dlclose(program);
  return found && is_inside_shim(found);
}

bool is_inside_shim(const void* address) noexcept { return object_base(address) == shim_base(); }

bool another_shim_copy_traces() noexcept {
  // Decided once: the copy loaded first traces; a later one only forwards.
  static const bool other_first = [] {
    try {
      std::vector<std::pair<std::string, const void*>> loaded;
      dl_iterate_phdr(list_loaded_objects, &loaded);
      for (const auto& [path, base] : loaded)
        if (is_shim_copy_object(path.c_str(), base)) return base != shim_base();
    } catch (...) {
      // No answer: this copy traces, as it would alone.
    }
    return false;
  }();
  return other_first;
}

BoundSlotScope::BoundSlotScope(uint8_t slot) noexcept : previous_(t_thread.bound_slot) { t_thread.bound_slot = slot; }
BoundSlotScope::~BoundSlotScope() { t_thread.bound_slot = previous_; }

const RealNccl* detail::resolve_default(const void* caller) noexcept {
  if (const RealNccl* real = g_slots[t_thread.bound_slot].load(std::memory_order_acquire)) return real;
  const RealNccl* real = nullptr;
  try {
    real = default_instance(true, caller, "global scope");
  } catch (...) {
    notice_once(Notice::kResolveFailed,
                "ncclwatch: an internal error stopped the search for NCCL; NCCL calls are answered with "
                "ncclSystemError while it fails, and nothing is traced");
    return nullptr;  // not cached: the next call searches again
  }
  if (!real) {
    notice_once(Notice::kNoNccl,
                "ncclwatch: no NCCL library is loaded in this process (looked for libnccl.so.2 and any "
                "libnccl.so*); NCCL calls are answered with ncclSystemError and nothing is traced");
    return nullptr;  // not cached: NCCL may still be loaded later
  }
  library_added();
  return real;
}

uint16_t current_library_id() noexcept {
  const RealNccl* real = g_slots[t_thread.bound_slot].load(std::memory_order_relaxed);
  return real ? real->library_id : 0;
}

int slot_for_library_of(const void* real_function, const void* caller) noexcept {
  int slot = -1;
  try {
    Dl_info info{};
    if (!dladdr(real_function, &info) || !info.dli_fname) return -1;
    const void* base = info.dli_fbase;
    std::string reached = "dlsym from " + module_name(caller);
    remember_dlsym_caller(caller);
    const RealNccl* default_lib = default_instance(false, nullptr, reached);
    auto slot_at_base = [&] {
      if (default_lib && default_lib->base == base) return 0;
      for (int s = 1; s < kMaxLibraries; ++s) {
        const RealNccl* real = g_slots[s].load(std::memory_order_acquire);
        if (real && real->base == base) return s;
      }
      return -1;
    };
    slot = slot_at_base();
    if (slot < 0) {
      void* handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
      if (!handle) return -1;
      RealNccl* fresh = read_library(handle, base);
      std::lock_guard lock(g_mutex);
      slot = slot_at_base();  // another thread may have made it meanwhile
      for (int s = 1; s < kMaxLibraries && slot < 0; ++s) {
        if (g_slots[s].load(std::memory_order_relaxed)) continue;
        publish(s, fresh, reached);
        fresh = nullptr;
        slot = s;
      }
      delete fresh;
    }
  } catch (...) {
    notice_once(Notice::kLibraryLookupFailed,
                "ncclwatch: an internal error kept an NCCL library found through dlsym from being told apart; "
                "calls through that lookup are not traced");
    return -1;
  }
  if (slot < 0) {
    notice_once(Notice::kTooManyLibraries,
                "ncclwatch: more NCCL libraries than ncclwatch can tell apart were opened in this process; "
                "calls to the extra ones are not traced");
  }
  library_added();
  return slot;
}

bool slot_serves(int slot, const char* name, const void* found) noexcept {
  if (slot < 0 || slot >= kMaxLibraries) return false;
  const RealNccl* real = g_slots[slot].load(std::memory_order_acquire);
  if (!real) return false;
  const void* fn = nullptr;
#define NCCLWATCH_API(group, api_name, since) \
  if (std::strcmp(name, #api_name) == 0) fn = reinterpret_cast<const void*>(real->api_name);
#include <ncclwatch/nccl_api.def>
#undef NCCLWATCH_API
  return fn && object_base(fn) == object_base(found);
}

void resolver_after_fork_in_child() noexcept { new (&g_mutex) std::mutex(); }

std::vector<const RealNccl*> known_libraries() {
  std::lock_guard lock(g_mutex);
  return {libraries().begin(), libraries().end()};
}

int library_count() noexcept { return g_library_count.load(std::memory_order_relaxed); }

const char* library_path(uint16_t id) noexcept {
  for (const auto& slot : g_slots) {
    const RealNccl* real = slot.load(std::memory_order_acquire);
    if (real && real->library_id == id) return real->path.c_str();
  }
  return "";
}

void set_library_added_hook(void (*hook)() noexcept) noexcept { g_library_added.store(hook, std::memory_order_release); }

}  // namespace ncclwatch
