// The op model's record loop: one file's op, timing, stall and totals records folded into its
// ProcessOps and into the aggregates of the reader thread that reads it (op_model.h says what
// they hold; analyze_job merges the threads' aggregates).
#pragma once

#include "model/op_model.h"
#include "model/trace_reader.h"

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

namespace ncclwatch::model {

struct LatencyKeyHash {
  size_t operator()(const LatencyKey& k) const {
    uint64_t h = k.comm_id ^ (k.bytes * 0x9E3779B97F4A7C15ull) ^ (uint64_t{k.api} << 48) ^
                 (uint64_t(static_cast<uint32_t>(k.nranks)) << 16) ^ static_cast<uint64_t>(k.timing);
    // murmur3's finalizer: every input bit reaches the low bits the cache indexes with
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return static_cast<size_t>(h);
  }
};

// Seq slots a thread may add beyond one per op it folded. Seqs count up by one per communicator,
// so a legitimate file needs no more slots than ops; a damaged one may skip a stretch. Without this
// bound a few records with leaping seqs would size gigabytes of slots.
constexpr uint64_t kSlotSlack = 1u << 16;

// What one reader thread folds the files it read into.
struct ThreadAggregate {
  uint8_t thread = 0;
  uint64_t slot_budget = kSlotSlack;  // slots it may still add (see kSlotSlack)
  std::unordered_map<uint64_t, uint32_t> comm_index;
  std::vector<CommOps> comms;
  std::unordered_map<LatencyKey, uint32_t, LatencyKeyHash> latency_index;
  std::vector<LatencyBucket> latency;
  std::map<RunTotalsKey, RunTotals> run_totals;
  std::map<RunTotalsKey, PlanCounts> plans;
  std::map<RunTotalsKey, KernelTotals> kernels;
  PeerLinks peers;

  uint32_t comm(uint64_t id) {
    auto [it, inserted] = comm_index.try_emplace(id, static_cast<uint32_t>(comms.size()));
    if (inserted) {
      comms.emplace_back();
      comms.back().comm_id = id;
    }
    return it->second;
  }

  LatencyBucket& bucket(const LatencyKey& key) {
    auto [it, inserted] = latency_index.try_emplace(key, static_cast<uint32_t>(latency.size()));
    if (inserted) {
      latency.emplace_back();
      latency.back().key = key;
    }
    return latency[it->second];
  }
};

// Adds ranks that passed `sig` at `seq` to the communicator's deviant groups (bounded by
// kMaxMismatchedSeqs).
void add_deviant(CommOps& c, uint64_t seq, const OpSignature& sig, uint8_t origin, bool implicit,
                 const std::vector<int32_t>& ranks);

// Streams one file's records into its ProcessOps and the thread's aggregates.
class OpScanner {
 public:
  OpScanner(ProcessOps& out, ThreadAggregate& agg, ImplausibleValues& implausible);
  ~OpScanner();
  void add(const RecordView& r);
  void finish();  // the end of the file

 private:
  class Fold;
  std::unique_ptr<Fold> fold_;
};

}  // namespace ncclwatch::model
