// Clocks. Record times are CLOCK_MONOTONIC nanoseconds. On the collective path they come from
// the CPU's invariant TSC, rescaled against clock_gettime every 10 ms per thread: inside virtual
// machines clock_gettime can be a system call costing microseconds, several per collective.
#pragma once

#include "process/thread_state.h"

#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace ncclwatch {

inline int64_t clock_monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

inline int64_t wall_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

namespace detail {
bool tsc_is_invariant() noexcept;  // constant and non-stop TSC (CPUID 0x80000007, signal-safe)
int64_t resample_tsc_clock(uint64_t tsc) noexcept;  // slow path: takes a fresh sample
}  // namespace detail

inline int64_t monotonic_ns() noexcept {
#if defined(__x86_64__)
  TscScale& s = t_thread.tsc;
  uint64_t tsc = __rdtsc();
  uint64_t ticks = tsc - s.base_tsc;
  // Within 10 ms of the last sample (about 2^25 ticks at a few GHz) the rate's error stays
  // far below a microsecond.
  if (s.ns_per_tick_q32 != 0 && ticks < (uint64_t{1} << 25)) {
    __extension__ using u128 = unsigned __int128;
    return s.base_ns + static_cast<int64_t>((static_cast<u128>(ticks) * s.ns_per_tick_q32) >> 32);
  }
  return detail::resample_tsc_clock(tsc);
#else
  return clock_monotonic_ns();
#endif
}

}  // namespace ncclwatch
