// Communicator identities: equal on every rank of one communicator, so analyzers can match ranks.
#pragma once

#include <nccl.h>
#include <xxhash.h>

#include <cstdint>

namespace ncclwatch {

inline uint64_t nonzero(uint64_t id) { return id ? id : 1; }

// Every rank passes the same unique id to init.
inline uint64_t comm_id_from_unique_id(const ncclUniqueId& unique_id) {
  return nonzero(XXH3_64bits(unique_id.internal, sizeof(unique_id.internal)));
}

// Every rank of a parent makes its splits in the same order (split is collective over the
// parent), and ranks of one child pass the same color: (parent, order, color) names the child.
inline uint64_t comm_id_for_child(uint64_t parent_id, uint64_t order, int64_t color_or_tag) {
  uint64_t parts[3] = {parent_id, order, static_cast<uint64_t>(color_or_tag)};
  return nonzero(XXH3_64bits(parts, sizeof(parts)));
}

// ncclCommInitAll makes all ranks in this one process: any process-unique value matches them.
inline uint64_t comm_id_for_local_group(uint64_t host_hash, uint64_t pid, uint64_t call_id) {
  uint64_t parts[3] = {host_hash, pid, call_id};
  return nonzero(XXH3_64bits(parts, sizeof(parts)));
}

}  // namespace ncclwatch
