// A lock-free single-producer single-consumer ring: how an application thread hands work to the
// GPU timing collector (and the collector hands events back) without a lock on the launch path.
#pragma once

#include <atomic>
#include <cstdint>

namespace ncclwatch {

template <class T, uint32_t N> class SpscRing {
  static_assert((N & (N - 1)) == 0, "the capacity must be a power of two");

 public:
  bool push(const T& value) noexcept {
    uint32_t tail = tail_.load(std::memory_order_relaxed);
    // Acquire pairs with the consumer's release of head_: the slot is free to overwrite.
    if (tail - head_.load(std::memory_order_acquire) == N) return false;
    items_[tail & (N - 1)] = value;
    // Release pairs with the consumer's acquire of tail_: it sees the item written above.
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }
  bool pop(T& out) noexcept {
    uint32_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_.load(std::memory_order_acquire)) return false;
    out = items_[head & (N - 1)];
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

 private:
  alignas(64) std::atomic<uint32_t> head_{0};
  alignas(64) std::atomic<uint32_t> tail_{0};
  T items_[N];
};

}  // namespace ncclwatch
