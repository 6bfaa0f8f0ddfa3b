// The plugin entry: ncclProfiler_v5, _v6 and _v7, exported by libncclwatch.so, and the set-up
// that points NCCL at them.
#pragma once

#include <atomic>

namespace ncclwatch {

namespace detail {
inline std::atomic<bool> g_profiler_plugin_armed{false};
inline std::atomic<bool> g_profiler_kernels_armed{false};  // NCCLWATCH_PROFILER=kernels, and it is safe
}

// Whether the plugin may be told of ops: set once, by set_up_profiler_plugin. Relaxed: a wrapper
// that reads it late only misses an op's plan.
inline bool profiler_plugin_armed() noexcept { return detail::g_profiler_plugin_armed.load(std::memory_order_relaxed); }

// At the process's first NCCL call, before NCCL loads its profiler plugin (at its first
// communicator): with NCCLWATCH_PROFILER=1 or kernels, sets NCCL_PROFILER_PLUGIN to this library where the
// application set none, or stands aside (saying so once) where it names a plugin of its own or
// the loaded NCCL has no profiler interface we know.
void set_up_profiler_plugin() noexcept;

}  // namespace ncclwatch
