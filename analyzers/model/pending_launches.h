// Ops waiting for the GPU timing of their launch, for readers that follow one trace file in
// record order (timeline, HTML lateness map). The rules every such reader must follow:
//
//  - A timed op, or a grouped one, waits under its launch id: the shim times a group at its
//    outermost ncclGroupEnd, whose op record comes after the group's ops and says (kOpTimed)
//    whether a timing follows. No timing follows an untimed group: its ops are released then,
//    not kept to the end of the file.
//  - A launch spanning several streams (one process driving several GPUs) gets one timing per
//    stream; each takes the ops of its stream.
//  - Launch ids count up per thread, not per process: "oldest" is arrival order. When more than
//    `capacity` launches wait (timings that never came: the op hung or the file ends), the oldest
//    is handed back, so memory stays bounded on any file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ncclwatch::report {

template <class Op> class PendingLaunches {
 public:
  explicit PendingLaunches(size_t capacity) : capacity_(capacity) {}

  struct Launch {
    uint64_t id = 0;
    bool promised = false;  // a timing was announced (timed op, or a timed group's end)
    std::vector<Op> ops;
  };

  // Adds `op` to launch `id`; `on_evicted(Launch&&)` receives the oldest launch if that makes
  // more than `capacity` wait.
  template <class Evicted> void add(uint64_t id, bool promised, Op op, Evicted&& on_evicted) {
    auto [it, fresh] = waiting_.try_emplace(id);
    Entry& e = it->second;
    if (fresh) {
      e.arrival = next_arrival_++;
      arrivals_.push_back({e.arrival, id});
    }
    e.promised |= promised;
    e.ops.push_back(std::move(op));
    if (waiting_.size() > capacity_)
      if (auto oldest = take_oldest()) on_evicted(std::move(*oldest));
    compact_arrivals();
  }

  // The group that ends with launch `id`: `timed` keeps its ops for the timing; otherwise they are
  // handed to `on_untimed(Launch&&)` now.
  template <class Untimed> void end_group(uint64_t id, bool timed, Untimed&& on_untimed) {
    auto it = waiting_.find(id);
    if (it == waiting_.end()) return;
    if (timed) {
      it->second.promised = true;
      return;
    }
    on_untimed(release(it));
  }

  // The timing of launch `id` on `stream`: hands its ops on that stream (every op when none
  // names it) to `on_timed(const std::vector<Op>&)`; the launch is done once no op is left.
  template <class Timed> void timing(uint64_t id, uint64_t stream, Timed&& on_timed) {
    auto it = waiting_.find(id);
    if (it == waiting_.end()) return;
    std::vector<Op>& ops = it->second.ops;
    std::vector<Op> on_stream;
    for (Op& op : ops)
      if (op.stream == stream) on_stream.push_back(op);
    if (on_stream.empty() || on_stream.size() == ops.size()) {
      on_timed(on_stream.empty() ? ops : on_stream);
      release(it);
      return;
    }
    on_timed(on_stream);
    std::erase_if(ops, [&](const Op& op) { return op.stream == stream; });
  }

  // Every launch still waiting, oldest first: for the end of the file.
  template <class Each> void drain(Each&& each) {
    while (auto oldest = take_oldest()) each(std::move(*oldest));
  }

  size_t size() const { return waiting_.size(); }

 private:
  struct Entry {
    uint64_t arrival = 0;
    bool promised = false;
    std::vector<Op> ops;
  };
  using Map = std::unordered_map<uint64_t, Entry>;

  Launch release(typename Map::iterator it) {
    Launch l{it->first, it->second.promised, std::move(it->second.ops)};
    waiting_.erase(it);
    return l;
  }

  // The arrival queue keeps entries of launches already done (cheaper than finding them): they
  // are skipped here, and swept out when they outnumber the live ones.
  std::optional<Launch> take_oldest() {
    while (!arrivals_.empty()) {
      auto [arrival, id] = arrivals_.front();
      arrivals_.pop_front();
      auto it = waiting_.find(id);
      if (it != waiting_.end() && it->second.arrival == arrival) return release(it);
    }
    return std::nullopt;
  }
  void compact_arrivals() {
    if (arrivals_.size() <= 2 * waiting_.size() + 1024) return;
    std::erase_if(arrivals_, [&](const std::pair<uint64_t, uint64_t>& a) {
      auto it = waiting_.find(a.second);
      return it == waiting_.end() || it->second.arrival != a.first;
    });
  }

  size_t capacity_;
  Map waiting_;
  std::deque<std::pair<uint64_t, uint64_t>> arrivals_;  // (arrival, launch id), oldest first
  uint64_t next_arrival_ = 0;
};

}  // namespace ncclwatch::report
