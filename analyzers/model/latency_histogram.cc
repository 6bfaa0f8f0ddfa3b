#include "model/latency_histogram.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace ncclwatch::model {

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

void LatencyHistogram::make_dense() {
  dense_.assign(kBuckets, 0);
  for (const auto& [bucket, n] : sparse_) dense_[bucket] = n;
  sparse_.clear();
  sparse_.shrink_to_fit();
}

void LatencyHistogram::add_to_bucket(size_t bucket, uint32_t n) {
  if (!dense_.empty()) {
    dense_[bucket] += n;
    return;
  }
  auto it = std::lower_bound(sparse_.begin(), sparse_.end(), std::pair<uint32_t, uint32_t>(static_cast<uint32_t>(bucket), 0));
  if (it != sparse_.end() && it->first == bucket) {
    it->second += n;
    return;
  }
  if (sparse_.size() < kSparseBuckets) {
    sparse_.insert(it, {static_cast<uint32_t>(bucket), n});
    return;
  }
  make_dense();
  dense_[bucket] += n;
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  if (other.dense_.empty()) {
    for (const auto& [bucket, n] : other.sparse_) add_to_bucket(bucket, n);
  } else {
    if (dense_.empty()) make_dense();
    for (size_t i = 0; i < kBuckets; ++i) dense_[i] += other.dense_[i];
  }
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
  auto value_of = [&](size_t bucket) {
    return std::clamp(static_cast<int64_t>(bucket_low(bucket) + bucket_width(bucket) / 2), min_, max_);
  };
  for (size_t i = 0; i < dense_.size(); ++i)
    if ((seen += dense_[i]) >= want) return value_of(i);
  for (const auto& [bucket, n] : sparse_)
    if ((seen += n) >= want) return value_of(bucket);
  return max_;
}

}  // namespace ncclwatch::model
