#include "resolver.h"

#include "notices.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace ncclwatch {
namespace {

// Pairs with the acquire load in real_nccl(): a reader that sees the pointer sees the table.
std::atomic<const RealNccl*> g_resolved{nullptr};
std::mutex g_resolve_mutex;

const void* shim_base() noexcept {
  static const void* base = [] {
    Dl_info info{};
    dladdr(reinterpret_cast<const void*>(&shim_base), &info);
    return static_cast<const void*>(info.dli_fbase);
  }();
  return base;
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

// A handle on the NCCL library already in the process, without loading a second copy.
void* open_loaded_nccl(std::string& how) {
  if (void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_NOLOAD)) {
    how = "libnccl.so.2 (already loaded)";
    return h;
  }
  std::string path;
  dl_iterate_phdr(find_loaded_nccl, &path);
  if (!path.empty()) {
    if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
      how = path + " (already loaded)";
      return h;
    }
  }
  // The global scope may know a copy under another name (e.g. a versioned file).
  if (void* sym = dlsym(RTLD_NEXT, "ncclGetVersion")) {
    Dl_info info{};
    if (dladdr(sym, &info) && info.dli_fname) {
      if (void* h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD)) {
        how = std::string(info.dli_fname) + " (global scope)";
        return h;
      }
    }
  }
  // The program called NCCL, so it expects one: load the standard name ourselves.
  if (void* h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL)) {
    how = "libnccl.so.2 (loaded by ncclwatch)";
    return h;
  }
  return nullptr;
}

void* lookup(void* handle, const char* name, bool& used_alias) {
  // pnccl* is NCCL's strong profiling alias: it can never resolve back to our ncclX.
  std::string alias = std::string("p") + name;
  void* fn = dlsym(handle, alias.c_str());
  if (fn && !is_inside_shim(fn)) {
    used_alias = true;
    return fn;
  }
  fn = dlsym(handle, name);
  return (fn && !is_inside_shim(fn)) ? fn : nullptr;
}

const RealNccl* resolve_locked() {
  std::string how;
  void* handle = open_loaded_nccl(how);
  if (!handle) return nullptr;

  auto* real = new RealNccl();  // lives for the rest of the process
  bool any_alias = false;
#define NCCLWATCH_API(group, name, since)                                        \
  {                                                                              \
    bool used_alias = false;                                                     \
    real->name = reinterpret_cast<decltype(real->name)>(lookup(handle, #name, used_alias)); \
    any_alias |= used_alias;                                                     \
    if (!real->name) real->missing.emplace_back(#name);                          \
  }
#include "nccl_api.def"
#undef NCCLWATCH_API
  real->has_profiling_aliases = any_alias;

  if (real->ncclGetVersion) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(real->ncclGetVersion), &info) && info.dli_fname) real->path = info.dli_fname;
    int version = 0;
    if (real->ncclGetVersion(&version) == ncclSuccess) real->version = version;
  }
  if (real->path.empty()) real->path = how;
  return real;
}

}  // namespace

bool is_inside_shim(const void* address) noexcept {
  Dl_info info{};
  return dladdr(address, &info) && info.dli_fbase == shim_base();
}

const RealNccl* real_nccl() noexcept {
  // Pairs with the release store below.
  if (const RealNccl* real = g_resolved.load(std::memory_order_acquire)) return real;
  try {
    std::lock_guard lock(g_resolve_mutex);
    if (const RealNccl* real = g_resolved.load(std::memory_order_relaxed)) return real;
    const RealNccl* real = resolve_locked();
    if (!real) {
      notice_once(Notice::kNoNccl,
                  "ncclwatch: no NCCL library is loaded in this process (looked for libnccl.so.2 and any "
                  "libnccl.so*); NCCL calls are answered with ncclSystemError and nothing is traced");
      return nullptr;  // not cached: NCCL may still be loaded later
    }
    g_resolved.store(real, std::memory_order_release);
    return real;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace ncclwatch
