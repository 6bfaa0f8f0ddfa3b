#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace ncclwatch::model {

// Log-linear histogram of durations in ns: exact below 128 ns, then 64 sub-buckets per power of
// two (1.6% resolution) up to about 39 hours. Mergeable, exact max. A job may hold one per
// communicator, op and size, most with a few samples: up to kSparseBuckets distinct buckets are
// kept as (bucket, count) pairs, beyond that as one count per bucket (11 KB).
class LatencyHistogram {
 public:
  static constexpr int kSubBits = 6;
  static constexpr int kLinear = 128;
  static constexpr int kMaxExp = 47;
  static constexpr size_t kBuckets = kLinear + (kMaxExp - 6) * (1 << kSubBits);

  // Inline: once per op a report reads.
  void add(int64_t ns) {
    if (ns < 0) ns = 0;
    add_to_bucket(bucket_of(static_cast<uint64_t>(ns)), 1);
    ++count_;
    sum_ += static_cast<double>(ns);
    max_ = std::max(max_, ns);
    min_ = std::min(min_, ns);
  }
  void merge(const LatencyHistogram& other);
  uint64_t count() const { return count_; }
  int64_t max() const { return max_; }
  int64_t min() const { return min_; }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  int64_t percentile(double p) const;  // p in [0, 100]; the bucket's midpoint, clamped to [min, max]

  // Calls f(bucket, count) for each bucket holding samples, in order.
  template <class F> void for_each_bucket(F&& f) const {
    if (dense_.empty()) {
      for (const auto& [bucket, n] : sparse_) f(static_cast<size_t>(bucket), uint64_t{n});
      return;
    }
    for (size_t b = 0; b < dense_.size(); ++b)
      if (dense_[b]) f(b, uint64_t{dense_[b]});
  }

  static size_t bucket_of(uint64_t ns) {
    if (ns < kLinear) return static_cast<size_t>(ns);
    int exp = std::bit_width(ns) - 1;  // >= 7
    if (exp > kMaxExp) return kBuckets - 1;
    uint64_t sub = (ns >> (exp - kSubBits)) & ((1u << kSubBits) - 1);
    return kLinear + static_cast<size_t>(exp - 7) * (1u << kSubBits) + static_cast<size_t>(sub);
  }
  static uint64_t bucket_low(size_t bucket);
  static uint64_t bucket_width(size_t bucket);

 private:
  static constexpr size_t kSparseBuckets = 64;
  void add_to_bucket(size_t bucket, uint32_t n);
  void make_dense();

  std::vector<std::pair<uint32_t, uint32_t>> sparse_;  // (bucket, count), by bucket; while dense_ is empty
  std::vector<uint32_t> dense_;                        // one count per bucket, once there are many
  uint64_t count_ = 0;
  double sum_ = 0;  // ns; a double keeps 15 digits, plenty for a mean
  int64_t max_ = 0;
  int64_t min_ = std::numeric_limits<int64_t>::max();
};

}  // namespace ncclwatch::model
