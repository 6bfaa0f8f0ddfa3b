// The op model's launches awaiting their GPU timing: a window over launch ids, for the record
// loop (pending_launches.h serves the readers that draw or map launches).
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

namespace ncclwatch::report {

// One op of a launch: a grouped launch spans several ops, maybe on several streams (one process
// driving several GPUs), each stream timed on its own.
struct LaunchOp {
  uint64_t seq = 0;         // collectives only (0: send/recv)
  uint64_t stream = 0;
  uint64_t bytes = 0;
  uint32_t rank_comm = 0;   // into ProcessOps::comms
  int32_t rank = -1;
  bool first_call = false;  // the rank's first of this op and size on this communicator
};

// Packed: the table holds up to 64k of these and every op record touches one.
struct Launch {
  bool valid = false;
  uint16_t api = 0;
  int32_t nranks = 0;
  uint32_t nops = 0;
  uint32_t streams_left = 0;  // streams whose timing has not come yet
  int64_t host_begin = 0;     // monotonic
  LaunchOp first;
  std::vector<LaunchOp> more; // the further ops of a grouped launch
};

// Ops whose GPU timing has not arrived yet. The shim numbers launches in issue order and the
// collector writes their timings soon after, so a window indexed by launch_id serves almost every
// lookup; anything outside it goes to a map.
class LaunchTable {
 public:
  static constexpr uint64_t kWindow = 1u << 16;

  Launch* find(uint64_t id) {
    if (id >= base_ && id - base_ < window_.size()) {
      Launch& l = window_[id - base_];
      return l.valid ? &l : nullptr;
    }
    auto it = far_.find(id);
    return it == far_.end() ? nullptr : &it->second;
  }

  // The launch `id`, made valid; `fresh` says whether it was new.
  Launch& insert(uint64_t id, bool& fresh) {
    if (Launch* l = find(id)) {
      fresh = false;
      return *l;
    }
    fresh = true;
    if (window_.empty()) base_ = id;
    if (id >= base_ && id - base_ < window_.size() + 4096) {  // ids count up by one; a jump goes to the map
      if (id - base_ >= window_.size()) window_.resize(id - base_ + 1);
      // A timing that never came (the op never ran) must not pin the window: drop the oldest.
      while (window_.size() > kWindow) pop_front();
      Launch& l = window_[id - base_];
      l = Launch{};
      l.valid = true;
      return l;
    }
    Launch& l = far_[id];
    l = Launch{};
    l.valid = true;
    if (far_.size() > kWindow) far_.erase(far_.begin());
    return l;
  }

  void erase(uint64_t id) {
    if (id >= base_ && id - base_ < window_.size()) {
      window_[id - base_].valid = false;
      while (!window_.empty() && !window_.front().valid) pop_front();
      return;
    }
    far_.erase(id);
  }

 private:
  void pop_front() {
    window_.pop_front();
    ++base_;
  }
  std::deque<Launch> window_;
  uint64_t base_ = 0;
  std::unordered_map<uint64_t, Launch> far_;
};

}  // namespace ncclwatch::report
