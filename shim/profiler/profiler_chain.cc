// Loading the application's profiler plugin and the pool of handle pairs (profiler_chain.h).
#include "profiler/profiler_chain.h"

#include "profiler/profiler_slots.h"

#include <dlfcn.h>

#include <cstring>
#include <new>

namespace ncclwatch {

int nccl_profiler_interface(int nccl_version) noexcept {
  if (nccl_version >= 23100) return 7;
  if (nccl_version >= 22900) return 6;
  return 5;
}

namespace {

bool ends_with(const std::string& s, const char* tail) {
  size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

}  // namespace

ChainedPlugin open_chained_plugin(const char* setting, int nccl_interface) {
  ChainedPlugin out;
  std::string name = setting ? setting : "";
  // NCCL's order (plugin_open.cc): the value as given, then, for a bare name that is not a
  // lib*.so file name, libnccl-profiler-<name>.so.
  void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::string error = library ? "" : dlerror();
  if (!library && name.find('/') == std::string::npos && !(name.rfind("lib", 0) == 0 && ends_with(name, ".so"))) {
    std::string prefixed = "libnccl-profiler-" + name + ".so";
    if ((library = dlopen(prefixed.c_str(), RTLD_NOW | RTLD_LOCAL))) name = prefixed;
  }
  if (!library) {
    out.why_not = "it cannot be opened (" + error + ")";
    return out;
  }
  out.library = name;
  for (int v = nccl_interface; v >= 5 && !out.table; --v) {
    std::string symbol = "ncclProfiler_v" + std::to_string(v);
    out.table = static_cast<const profiler_abi::Plugin*>(dlsym(library, symbol.c_str()));
    out.version = v;
  }
  if (!out.table) {
    out.why_not = "it has no profiler table of version 5 to " + std::to_string(nccl_interface);
    dlclose(library);
  } else if (!out.table->init || !out.table->startEvent || !out.table->stopEvent || !out.table->recordEventState ||
             !out.table->finalize) {
    out.why_not = "its table lacks callbacks";
    out.table = nullptr;
  }
  return out;
}

bool HandlePairs::create() noexcept {
  if (!pairs_) pairs_ = new (std::nothrow) HandlePair[kCapacity];
  return pairs_ != nullptr;
}

HandlePair* HandlePairs::take() noexcept {
  if (!pairs_) return nullptr;
  for (int probe = 0; probe < 64; ++probe) {
    HandlePair& p = pairs_[cursor_.fetch_add(1, std::memory_order_relaxed) % kCapacity];
    if (!p.taken.load(std::memory_order_relaxed) && !p.taken.exchange(true, std::memory_order_acquire)) return &p;
  }
  return nullptr;
}

HandlePair* HandlePairs::pair_of(void* handle) const noexcept {
  return profiler_slots::element_at(pairs_, kCapacity, handle);
}

HandlePairs& handle_pairs() noexcept {
  static constinit HandlePairs pairs;
  return pairs;
}

}  // namespace ncclwatch
