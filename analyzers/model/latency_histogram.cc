#include "latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace ncclwatch::report {

size_t LatencyHistogram::bucket_of(uint64_t ns) {
  if (ns < kLinear) return static_cast<size_t>(ns);
  int exp = std::bit_width(ns) - 1;  // >= 7
  if (exp > kMaxExp) return kBuckets - 1;
  uint64_t sub = (ns >> (exp - kSubBits)) & ((1u << kSubBits) - 1);
  return kLinear + static_cast<size_t>(exp - 7) * (1u << kSubBits) + static_cast<size_t>(sub);
}

uint64_t LatencyHistogram::bucket_low(size_t bucket) {
  if (bucket < kLinear) return bucket;
  size_t exp = (bucket - kLinear) / (1u << kSubBits) + 7;
  uint64_t sub = (bucket - kLinear) % (1u << kSubBits);
  return (uint64_t{1} << exp) + (sub << (exp - kSubBits));
}

uint64_t LatencyHistogram::bucket_width(size_t bucket) {
  if (bucket < kLinear) return 1;
  size_t exp = (bucket - kLinear) / (1u << kSubBits) + 7;
  return uint64_t{1} << (exp - kSubBits);
}

void LatencyHistogram::add(int64_t ns) {
  if (ns < 0) ns = 0;
  ++counts_[bucket_of(static_cast<uint64_t>(ns))];
  ++count_;
  sum_ += static_cast<double>(ns);
  max_ = std::max(max_, ns);
  min_ = std::min(min_, ns);
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  for (size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  max_ = std::max(max_, other.max_);
  min_ = std::min(min_, other.min_);
}

int64_t LatencyHistogram::percentile(double p) const {
  if (!count_) return 0;
  // The rank of the sample wanted, 1-based (nearest-rank definition).
  uint64_t want = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  want = std::clamp<uint64_t>(want, 1, count_);
  uint64_t seen = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= want) {
      int64_t mid = static_cast<int64_t>(bucket_low(i) + bucket_width(i) / 2);
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

}  // namespace ncclwatch::report
