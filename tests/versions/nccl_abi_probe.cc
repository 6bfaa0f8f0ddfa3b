// Drives a real NCCL library of any version through the shim, without a GPU: looks up every
// function of the shim's API table, then makes the calls that need no device (ids, init that
// fails for want of one). Prints one JSON object: what it found and what NCCL answered, so a run
// under the shim can be compared with a run without it.
//
//   nccl_abi_probe LIBNCCL   reach NCCL through dlopen + dlsym (the shim's bound wrappers)
//   nccl_abi_probe_linked    NCCL linked in, found on LD_LIBRARY_PATH (the shim's exports)
#include <dlfcn.h>
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

#include "resolve/nccl_api.h"

namespace {

#ifdef PROBE_LINKED
template <class Fn> Fn lookup(void*, const char*, Fn linked) { return linked; }
#define FUNCTION(lib, name) lookup(lib, #name, &::name)
#else
template <class Fn> Fn lookup(void* lib, const char* name, Fn) { return reinterpret_cast<Fn>(dlsym(lib, name)); }
#define FUNCTION(lib, name) lookup(lib, #name, &::name)
#endif

// An application built against NCCL 2.14's nccl.h passes this much of ncclConfig_t: the struct
// ended at netName. It is placed against an unreadable page, so whoever reads past `size` faults.
ncclConfig_t* old_layout_config() {
  constexpr size_t kOldSize = offsetof(ncclConfig_t, splitShare);
  long page = sysconf(_SC_PAGESIZE);
  auto* pages = static_cast<char*>(mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (pages == MAP_FAILED || mprotect(pages + page, page, PROT_NONE) != 0) return nullptr;
  auto* config = reinterpret_cast<ncclConfig_t*>(pages + page - kOldSize);
  ncclConfig_t full = NCCL_CONFIG_INITIALIZER;
  std::memcpy(config, &full, kOldSize);
  config->size = kOldSize;
  config->version = NCCL_VERSION(2, 14, 3);
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  void* lib = nullptr;
#ifndef PROBE_LINKED
  if (argc < 2) {
    std::fprintf(stderr, "usage: nccl_abi_probe LIBNCCL\n");
    return 2;
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 2;
  }
#endif
  std::string found;
  // Lookups checked as dlsym(3) says: dlerror() cleared before, NULL after a successful one.
  int stale_errors = 0;
#ifndef PROBE_LINKED
#define NCCLWATCH_API(group, name, since)                                  \
  {                                                                        \
    dlerror();                                                             \
    void* fn = dlsym(lib, #name);                                          \
    bool error = dlerror() != nullptr;                                     \
    if (fn) found += std::string(found.empty() ? "" : ",") + "\"" #name "\""; \
    if (fn && error) ++stale_errors;                                       \
  }
#include <ncclwatch/nccl_api.def>
#undef NCCLWATCH_API
#endif

  int version = 0;
  FUNCTION(lib, ncclGetVersion)(&version);
  ncclUniqueId id{};
  int get_id = FUNCTION(lib, ncclGetUniqueId)(&id);
  ncclComm_t comm = nullptr;
  int init = FUNCTION(lib, ncclCommInitRank)(&comm, 1, id, 0);
  if (init == ncclSuccess) FUNCTION(lib, ncclCommDestroy)(comm);
  int init_config = -1;
  auto init_with_config = FUNCTION(lib, ncclCommInitRankConfig);
  if (ncclConfig_t* config = old_layout_config(); config && init_with_config) {
    comm = nullptr;
    init_config = init_with_config(&comm, 1, id, 0, config);
    if (init_config == ncclSuccess) FUNCTION(lib, ncclCommDestroy)(comm);
  }
  // A function this NCCL may lack, called only under the shim (without it, the dynamic linker
  // would fail the call): the shim must answer ncclInvalidUsage rather than call anything.
  int absent_call = -1;
#ifdef PROBE_LINKED
  if (argc > 1 && std::strcmp(argv[1], "--call-window-register") == 0) {
    ncclWindow_t window = nullptr;
    absent_call = ncclCommWindowRegister(nullptr, nullptr, 0, &window, 0);
  }
#endif
  std::printf("{\"version\": %d, \"get_unique_id\": %d, \"init_rank\": %d, \"init_rank_config\": %d, "
              "\"window_register\": %d, \"stale_dlerror\": %d, \"found\": [%s]}\n",
              version, get_id, init, init_config, absent_call, stale_errors, found.c_str());
  return 0;
}
