#pragma once

#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include <cstdint>

namespace ncclwatch {

inline int64_t monotonic_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

inline int64_t wall_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// Kernel thread id, cached per thread (a forked child's main thread re-reads it: see fork.cc).
uint32_t current_tid() noexcept;
void forget_cached_tid() noexcept;

}  // namespace ncclwatch
