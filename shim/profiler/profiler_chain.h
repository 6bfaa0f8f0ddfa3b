// The application's own profiler plugin (NCCL_PROFILER_PLUGIN naming another library: NCCL
// Inspector, for one), chained behind the shim's plugin entry: NCCL loads only one profiler
// plugin, so the shim loads theirs and hands it every event it asked for, with handles of its own
// as parents, and their answers never reach NCCL.
#pragma once

#include <ncclwatch/nccl_profiler_abi.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace ncclwatch {

// The environment variable that tells a child process, which inherits NCCL_PROFILER_PLUGIN naming
// the shim, which plugin the application named.
inline constexpr const char* kChainedPluginVariable = "NCCLWATCH_PROFILER_CHAINED";

struct ChainedPlugin {
  const profiler_abi::Plugin* table = nullptr;  // null: none, `why_not` says why
  int version = 0;                              // the table's interface version
  std::string library;                          // as opened
  std::string why_not;
};

// Opens `setting` (NCCL_PROFILER_PLUGIN's value) as NCCL does: the name as given, then
// libnccl-profiler-<name>.so; and takes its newest table no newer than `nccl_interface` (the
// version the loaded NCCL asks for), down to v5: a v5 plugin reads the start of a v6 or v7
// descriptor, which keeps v5's layout. Older tables are NCCL's own business: not chained.
ChainedPlugin open_chained_plugin(const char* setting, int nccl_interface);

// The profiler interface version the loaded NCCL asks its plugin for: 5 (2.28), 6 (2.29, 2.30)
// or 7 (2.31 and later).
int nccl_profiler_interface(int nccl_version) noexcept;

// The handle NCCL gets for an event while a plugin is chained: ours and theirs (either may be
// null). Process-wide, from a fixed pool, because NCCL's stopEvent and recordEventState get only
// the handle; a pair is taken at startEvent and given back at stopEvent.
struct HandlePair {
  std::atomic<bool> taken{false};
  void* ours = nullptr;
  void* theirs = nullptr;
};

class HandlePairs {
 public:
  static constexpr uint32_t kCapacity = 1u << 16;  // events open at once, over all communicators

  // Allocates the pool (at set-up, only where a plugin is chained).
  bool create() noexcept;
  // A free pair, or null when kCapacity are open (a few probes from a spreading cursor).
  HandlePair* take() noexcept;
  static void give_back(HandlePair* p) noexcept { p->taken.store(false, std::memory_order_release); }
  // The pair `handle` is, or null when it is not one of the pool's (never dereferenced unchecked).
  HandlePair* pair_of(void* handle) const noexcept;

 private:
  HandlePair* pairs_ = nullptr;
  std::atomic<uint32_t> cursor_{0};
};

HandlePairs& handle_pairs() noexcept;

}  // namespace ncclwatch
