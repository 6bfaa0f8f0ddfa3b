// Where a rank's program departed from its peers'.
//
// Identical ops (the 7th and 8th all-reduce of a training loop) cannot be told apart by content, so
// the seq at which a rank that skipped one stops matching is invisible. But every trace orders the
// rank's calls across all of its communicators: count the ops a rank issued on communicator A
// before each op of another communicator B, and compare with a peer. The first op of B before which
// the counts differ bounds the departure to the ops of A between two ops of B. Within that
// stretch, a jump in the rank's GPU start time relative to the peer, if it stands alone, points
// at the op itself.
//
// Only the files of the ranks that issued a different number of ops (and one reference peer each)
// are read again, so the cost stays small.
#pragma once

#include "model/op_model.h"

#include <map>
#include <string>
#include <vector>

namespace ncclwatch::model {

struct Divergence {
  int32_t rank = -1;
  uint64_t from_seq = 0;     // the departure happened within [from_seq, to_seq] of this communicator
  uint64_t to_seq = 0;
  uint64_t likely_seq = 0;   // the seq itself, only when the evidence singles it out (0 none)
  int32_t reference_rank = -1;
  uint64_t other_comm = 0;   // the communicator whose ops bound the stretch (0 none)
  uint64_t other_from_seq = 0, other_to_seq = 0;
  bool departed = true;      // false: the evidence cannot tell which of the two departed
  std::string reason;
};

// comm_id -> divergences found on it. `names` gives communicators' names for the reasons.
std::map<uint64_t, std::vector<Divergence>> find_divergences(const JobAnalysis& analysis,
                                                             const std::map<uint64_t, std::string>& names);

}  // namespace ncclwatch::model
