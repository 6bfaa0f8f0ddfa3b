// A spin lock the signal path can try without blocking (the registry's, callsite.cc's modules).
#pragma once

#include <atomic>

namespace ncclwatch {

class SpinLock {
 public:
  void lock() noexcept {
    // Acquire pairs with the release in unlock(): the holder's writes are visible to the next.
    while (flag_.exchange(true, std::memory_order_acquire)) {
      while (flag_.load(std::memory_order_relaxed)) __builtin_ia32_pause();
    }
  }
  bool try_lock() noexcept { return !flag_.exchange(true, std::memory_order_acquire); }
  void unlock() noexcept { flag_.store(false, std::memory_order_release); }
  void reset() noexcept { flag_.store(false, std::memory_order_relaxed); }

 private:
  std::atomic<bool> flag_{false};
};

}  // namespace ncclwatch
