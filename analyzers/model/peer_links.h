// What NCCL's proxy moved between ranks over the network, from OpProxy records
// (NCCLWATCH_PROFILER=peers): per communicator, rank, peer and direction, the bytes, the operations'
// time and how long their steps waited on the peer. NCCL reports proxy steps for its network
// transport only: P2P/NVLink and shared-memory traffic, which the kernel moves itself, has none.
//
// A slow peer (a CPU-starved proxy, a slow link) holds up the whole pipeline: in a ring every rank
// receives late because its upstream forwards late, down to the rank after the slow one, so every
// rank's receive steps wait long on their peer but the slow one's: what it receives is there when
// its proxy looks. Measured on an H100 with four ranks over sockets and rank 2's proxy threads on one
// core shared with busy loops: the other ranks' receive steps waited 17.8-18.8 ms each, rank 2's
// 4.7 ms, with every rank's steps as long (15.8-18.9 ms); fair, the four waited 433-528 us.
#pragma once

#include "model/trace_reader.h"

#include <ncclwatch/trace_format.h>

#include <compare>
#include <cstdint>
#include <map>
#include <string>
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
  uint64_t step_ns = 0;       // their steps' whole time, summed
  uint64_t gpu_wait_ns = 0;   // steps waiting on this rank's GPU
  uint64_t peer_wait_ns = 0;  // steps waiting on the peer and the network
  uint64_t partial = 0;       // operations with steps missing (lost, or never done)
  // Sends whose data's moving time is known (kProxyMoving): their bytes, and the time data moved to
  // the peer, from each operation's first step's data ready for the network to its stop, overlapping
  // channels and operations counted once.
  uint64_t moving_bytes = 0, moving_ns = 0;
  // The latest stretch of that time, not yet in moving_ns (close_moving_stretches ends it).
  int64_t stretch_begin = 0, stretch_end = 0;
  // Its length: end >= begin, as unsigned so that no pair of a file's times overflows.
  uint64_t stretch_ns() const { return uint64_t(stretch_end) - uint64_t(stretch_begin); }
  void merge(const PeerLink& o);  // `o`'s stretch closed
  double peer_wait_us_per_step() const { return steps ? peer_wait_ns / 1e3 / double(steps) : 0; }
  // What the sends moved per second while moving (bytes per ns are GB/s); 0 where not known.
  double send_gbps() const { return moving_ns ? double(moving_bytes) / double(moving_ns) : 0; }
};

using PeerLinks = std::map<PeerLinkKey, PeerLink>;

// Folds one file's OpProxy records into `out`; a record that cannot be true (a rank or peer outside
// its communicator, a stop before its start, waits longer than its steps) is named and left out.
void add_proxy_operation(PeerLinks& out, const trace::OpProxyRecord& p, const RecordView& r,
                         ImplausibleValues& implausible);
// At the end of a file: each link's moving time whole.
void close_moving_stretches(PeerLinks& links);

// A rank whose receive steps waited least on their peers, in one communicator, while the others'
// waited on theirs.
struct SlowPeer {
  uint64_t comm_id = 0;
  int32_t rank = -1;
  int32_t nranks = -1;
  double own_wait_us = 0;       // per receive step, its own on its peers
  double others_us = 0;         // the same for the communicator's other ranks: their median
  double step_us = 0;           // its steps' time, per step
  double others_step_us = 0;    // the others' (median)
  std::vector<int32_t> waiting; // the ranks that waited more on their peers than it did, sorted
  uint64_t steps = 0;           // its receive steps this rests on
};

// Per communicator of three or more ranks' receive steps, its slow peer where there is one: the
// others' receive steps waited at least kSlowFactor times as long per step as its own (their
// median), and by kMinExcessUs more, while its steps took at least half as long as theirs (it was
// busy, not idle).
inline constexpr double kSlowFactor = 2.0;
inline constexpr double kMinExcessUs = 20.0;
std::vector<SlowPeer> slow_peers(const PeerLinks& links);
// The finding in one sentence; `comm`: the communicator as the reports label it.
std::string slow_peer_text(const SlowPeer& s, const std::string& comm);

}  // namespace ncclwatch::model
