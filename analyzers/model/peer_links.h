// What NCCL's proxy moved between ranks over the network, from OpProxy records
// (NCCLWATCH_PROFILER=peers): per communicator, rank, peer and direction, the bytes, the operations'
// time and how long their steps waited on the peer. NCCL reports proxy steps for its network
// transport only: P2P/NVLink and shared-memory traffic, which the kernel moves itself, has none.
//
// A slow peer is one the others wait on: a CPU-starved proxy or a slow link posts its buffers and
// data late, so the ranks sending to it and receiving from it wait in those steps, while it waits
// on nobody (their data is there when it looks). A ring passes the wait on, so a rank further down
// waits too, but never more than the ranks next to the slow one.
#pragma once

#include "model/trace_reader.h"

#include <ncclwatch/trace_format.h>

#include <compare>
#include <cstdint>
#include <map>
#include <vector>

namespace ncclwatch::model {

struct PeerLinkKey {
  uint64_t comm_id = 0;
  int32_t rank = -1;    // the rank whose proxy moved the data
  int32_t remote = -1;  // to or from this peer
  bool send = false;
  auto operator<=>(const PeerLinkKey&) const = default;
};

struct PeerLink {
  int32_t nranks = -1;
  uint64_t operations = 0, steps = 0, bytes = 0;
  uint64_t busy_ns = 0;       // the operations' start to stop, summed
  uint64_t step_ns = 0;       // their steps' whole time, summed
  uint64_t gpu_wait_ns = 0;   // steps waiting on this rank's GPU
  uint64_t peer_wait_ns = 0;  // steps waiting on the peer and the network
  uint64_t partial = 0;       // operations with steps missing (lost, or never done)
  void merge(const PeerLink& o);
  double peer_wait_us_per_step() const { return steps ? peer_wait_ns / 1e3 / double(steps) : 0; }
  double gb_per_s() const { return busy_ns ? double(bytes) / double(busy_ns) : 0; }  // bytes/ns = GB/s
};

using PeerLinks = std::map<PeerLinkKey, PeerLink>;

// Folds one file's OpProxy records into `out`; a record that cannot be true (a rank or peer outside
// its communicator, a stop before its start, waits longer than its steps) is named and left out.
void add_proxy_operation(PeerLinks& out, const trace::OpProxyRecord& p, const RecordView& r,
                         ImplausibleValues& implausible);

// A rank the others waited on, in one communicator.
struct SlowPeer {
  uint64_t comm_id = 0;
  int32_t rank = -1;
  int32_t nranks = -1;
  double waited_on_us = 0;      // per step, by the ranks sending to it and receiving from it
  double others_us = 0;         // the same for the communicator's other ranks: their median
  double own_wait_us = 0;       // what it waited per step on its peers
  std::vector<int32_t> waiting; // the ranks that waited on it, sorted
  uint64_t steps = 0;           // the steps of theirs this rests on
};

// Per communicator, its slow peer where there is one: waited on per step at least kSlowFactor times
// as long as the others are (their median), and as long as it waits on them, and by kMinExcessUs more.
inline constexpr double kSlowFactor = 2.0;
inline constexpr double kMinExcessUs = 20.0;
std::vector<SlowPeer> slow_peers(const PeerLinks& links);

}  // namespace ncclwatch::model
