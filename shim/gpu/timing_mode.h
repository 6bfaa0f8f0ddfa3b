// Which timing the shim runs (NCCLWATCH_TIMING): gpu where a CUDA driver is usable, else host.
// Decided once, at the first op, by gpu_timer.cc; read everywhere the driver may be called.
#pragma once

#include <atomic>

namespace ncclwatch {

enum class TimingMode { kGpu, kHost };

// NCCLWATCH_TIMING (gpu where a CUDA driver is usable, else host), decided at the first op.
TimingMode decide_timing_mode() noexcept;
namespace detail {
inline std::atomic<int> g_timing_mode{-1};  // TimingMode once decided
}
inline TimingMode timing_mode() noexcept {
  // Acquire pairs with the release in decide_timing_mode(): the driver table is visible.
  int mode = detail::g_timing_mode.load(std::memory_order_acquire);
  return mode >= 0 ? static_cast<TimingMode>(mode) : decide_timing_mode();
}

}  // namespace ncclwatch
