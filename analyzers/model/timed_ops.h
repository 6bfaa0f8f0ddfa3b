// The op records of one trace file paired with the GPU timings of their launches: the one place
// that knows how the shim times launches. The op model (latency, hang, summary, metrics), the
// timeline and the html lateness map all read a file's ops through it; each keeps what it needs
// of an op (its Tag) until the launch's timing comes.
//
// The rules, as the shim writes the records:
//  - An op waits for a timing when it is timed (kOpTimed) or grouped: the shim times a group at its
//    outermost ncclGroupEnd, whose op record comes after the group's ops and says (kOpTimed)
//    whether a timing follows. No timing follows an untimed group: its ops are released then,
//    not kept to the end of the file. An op captured into a CUDA graph runs at replay and never
//    waits.
//  - A launch spanning several streams (one process driving several GPUs) gets one timing per
//    stream; each takes the ops of its stream. A timing naming a stream none of its ops named
//    takes them all.
//  - Launch ids count up per thread, not per process: "oldest" is arrival order. When more than
//    kMaxWaitingLaunches wait (timings that never came: the op hung or the file ends), the oldest
//    is given up, so memory stays bounded on any file.
//  - NCCL runs a communicator's kernels one after another, in issue order, whatever streams they
//    are on. A launch's start event fires when its stream reaches it; when the communicator's
//    previous launch (on another stream: FSDP's all-gathers and reduce-scatters) still runs, the
//    kernel waits for it. So a launch begins at the later of its start event and the end of its
//    communicator's previous launch, where that one's timing is known; where it is not, and that
//    launch was on another stream, the begin is only a lower bound (the time an upper bound).
//  - A launch that began as its rank's previous launch ended (on its communicator or its stream)
//    was held by that launch, not late by itself: the readers of lateness leave it out.
//  - A timing may come just before its op: earlier shims wrote a lone op's record after
//    handing its launch to the GPU collector. The last few timings of launches not seen are kept;
//    a lone op of that launch and stream, begun before the timing ended, takes its timing.
//
// A Sink has:
//   std::optional<Tag> on_op(trace::OpRecord&, const RecordView&, bool awaits_timing);
//       every collective and point-to-point op as it comes (a copy: a sink that takes implausible
//       values as unknown corrects them here, and its launch keeps the corrected op's); a Tag
//       returned for an op that awaits its timing is kept for it
//   void on_timed(std::span<const Tag> ops, const LaunchTiming&);
//   void on_no_timing(std::span<const Tag> ops, bool promised, NoTiming why);
//       ops whose timing will not come; `promised`: a timing was announced for them
#pragma once

#include "model/trace_reader.h"

#include <ncclwatch/trace_format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ncclwatch::model {

inline constexpr size_t kMaxWaitingLaunches = size_t{1} << 16;
// Timings of launches not seen kept for an op that comes after them (see the rules above).
inline constexpr size_t kEarlyTimingsKept = 8;
// A launch that began within this long of its rank's previous launch's end began at that end (the
// GPU moves from one kernel to the next in a few microseconds).
inline constexpr int64_t kBackToBackNs = 20'000;

// One launch's timing on one stream, as the readers of its ops take it.
struct LaunchTiming {
  int64_t begin_ns = 0;      // monotonic: the GPU start, else the launch's host enqueue
  int64_t end_ns = 0;        // monotonic: the GPU end
  bool gpu_begin = false;    // begin_ns is the GPU start (kTimingHasBegin)
  bool alike = false;        // a launch every rank times alike (kTimingAlike)
  bool stream_named = true;  // an op of the launch named the timed stream (else the ops are all of them)
  // begin_ns is the start event, and the communicator's previous launch ran on another stream with
  // no timing: the launch may have waited for it, so end - begin is an upper bound of its own time.
  bool begin_upper_bound = false;
  // It began as its rank's previous launch (on its communicator or its stream) ended: held by it.
  bool began_at_previous_end = false;
  uint32_t launch_ops = 0;   // ops of the whole launch, on every stream
  uint16_t launch_api = 0;   // its first op's
  int32_t launch_nranks = 0;
};

enum class NoTiming : uint8_t {
  kUntimedGroup,  // the group's end said no timing follows
  kGivenUp,       // too many launches waited: the oldest
  kFileEnded,     // still waiting when the file ended (finish)
};

// Whether an op waits for a launch timing (see the rules above).
inline bool awaits_launch_timing(const trace::OpRecord& o) {
  return !(o.flags & trace::kOpCaptured) && ((o.flags & trace::kOpTimed) || o.group_depth > 0);
}

// The order launches run in on each communicator (rank) and on each stream of one file, and when
// the last timed one of each ended: a launch's begin is corrected by it (see the rules above).
// Memory: one entry per communicator rank and per stream the file used.
class Order {
 public:
  struct Place {
    uint64_t comm_key = 0, stream = 0;
    uint64_t in_comm = 0, in_stream = 0;  // from 1; 0: no place (captured, or no communicator id)
    bool previous_on_other_stream = false;  // the communicator's previous launch was on another stream
  };

  // The place of the launch `o` belongs to (its first op takes it; the group's other ops share it).
  Place take_place(const trace::OpRecord& o) {
    if (o.comm_id == 0) return {};
    Place p;
    p.comm_key = o.comm_id ^ (static_cast<uint64_t>(static_cast<uint32_t>(o.rank)) * 0x9e3779b97f4a7c15ull);
    p.stream = o.stream;
    Line& comm = comms_.at(p.comm_key);
    if (comm.last_launch != o.launch_id || comm.taken == 0) {
      p.previous_on_other_stream = comm.taken > 0 && comm.last_stream != o.stream;
      ++comm.taken;
      comm.last_launch = o.launch_id;
      comm.last_stream = o.stream;
    }
    p.in_comm = comm.taken;
    Line& stream = streams_.at(o.stream);
    if (stream.last_launch != o.launch_id || stream.taken == 0) {
      ++stream.taken;
      stream.last_launch = o.launch_id;
    }
    p.in_stream = stream.taken;
    return p;
  }

  // Corrects `t` (a GPU-begun timing of the launch at `p`) by its predecessors' ends, and notes its end.
  void on_timing(const Place& p, LaunchTiming& t) {
    if (p.in_comm == 0) return;
    Line& comm = comms_.at(p.comm_key);
    Line& stream = streams_.at(p.stream);
    if (t.gpu_begin) {
      int64_t event_begin = t.begin_ns;
      bool comm_known = comm.ended_place > 0 && comm.ended_place + 1 == p.in_comm;
      if (comm_known) t.begin_ns = std::max(t.begin_ns, comm.ended_ns);
      else t.begin_upper_bound = p.previous_on_other_stream;
      bool stream_known = stream.ended_place > 0 && stream.ended_place + 1 == p.in_stream;
      t.began_at_previous_end = (comm_known && event_begin - comm.ended_ns <= kBackToBackNs) ||
                                (stream_known && event_begin - stream.ended_ns <= kBackToBackNs);
    }
    note_end(comm, p.in_comm, t.end_ns);
    note_end(stream, p.in_stream, t.end_ns);
  }

 private:
  struct Line {
    uint64_t taken = 0;          // launches placed
    uint64_t last_launch = 0, last_stream = 0;
    uint64_t ended_place = 0;    // the latest place whose end is known
    int64_t ended_ns = 0;
  };
  static void note_end(Line& line, uint64_t place, int64_t end_ns) {
    if (place <= line.ended_place) return;  // timings may come out of order: keep the latest place's
    line.ended_place = place;
    line.ended_ns = end_ns;
  }
  // The lines by key, the last one looked up remembered: a file's ops mostly follow one another on
  // one communicator and stream, and this lookup was a tenth of the op model's time.
  class Lines {
   public:
    Line& at(uint64_t key) {
      if (last_ && key == last_key_) return *last_;
      last_key_ = key;
      return *(last_ = &lines_[key]);  // nodes stay put as the table grows
    }

   private:
    std::unordered_map<uint64_t, Line> lines_;
    uint64_t last_key_ = 0;
    Line* last_ = nullptr;
  };
  Lines comms_, streams_;
};

// Launch ids to their arrival (timed_ops' ring): open addressing with linear probing, an erase
// shifting back what follows (no tombstones). Measured over the whole of `hang` (callgrind): the
// std::unordered_map and arrival deque it replaced cost 9 % more instructions, abseil's
// flat_hash_map in its place 15 % more.
class LaunchIndex {
 public:
  static constexpr uint64_t kNone = ~uint64_t{0};

  uint64_t find(uint64_t id) const {
    if (slots_.empty()) return kNone;
    for (size_t i = home(id);; i = (i + 1) & mask_) {
      if (slots_[i].arrival == kNone || slots_[i].id == id) return slots_[i].arrival;
    }
  }
  void insert(uint64_t id, uint64_t arrival) {  // `id` not held
    if ((used_ + 1) * 2 > slots_.size()) rehash(std::max<size_t>(16, slots_.size() * 2));
    put(id, arrival);
    ++used_;
  }
  void set(uint64_t id, uint64_t arrival) {  // `id` held
    for (size_t i = home(id);; i = (i + 1) & mask_)
      if (slots_[i].id == id && slots_[i].arrival != kNone) {
        slots_[i].arrival = arrival;
        return;
      }
  }
  void erase(uint64_t id) {  // `id` held
    size_t i = home(id);
    while (slots_[i].id != id || slots_[i].arrival == kNone) i = (i + 1) & mask_;
    for (size_t j = (i + 1) & mask_; slots_[j].arrival != kNone; j = (j + 1) & mask_) {
      size_t k = home(slots_[j].id);
      bool stays = i < j ? (i < k && k <= j) : (i < k || k <= j);  // its home lies in (i, j]
      if (stays) continue;
      slots_[i] = slots_[j];
      i = j;
    }
    slots_[i].arrival = kNone;
    --used_;
  }

 private:
  struct Slot {
    uint64_t id = 0;
    uint64_t arrival = kNone;
  };
  size_t home(uint64_t id) const { return static_cast<size_t>((id * 0x9E3779B97F4A7C15ull) >> shift_); }
  void put(uint64_t id, uint64_t arrival) {
    size_t i = home(id);
    while (slots_[i].arrival != kNone) i = (i + 1) & mask_;
    slots_[i] = {id, arrival};
  }
  void rehash(size_t size) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(size, Slot{});
    mask_ = size - 1;
    shift_ = 64 - std::countr_zero(size);
    for (const Slot& s : old)
      if (s.arrival != kNone) put(s.id, s.arrival);
  }
  std::vector<Slot> slots_;  // a power of two, at most half used
  size_t used_ = 0, mask_ = 0;
  int shift_ = 64;
};

template <class Tag, class Sink> class TimedOps {
 public:
  explicit TimedOps(Sink& sink, size_t capacity = kMaxWaitingLaunches) : sink_(sink), capacity_(capacity) {}

  // Op records and GPU timings; every other record is left to the caller.
  void add(const RecordView& r) {
    if (r.type == trace::RecordType::kCollective) {
      if (const auto* o = r.as<trace::OpRecord>()) on_op(*o, r);
    } else if (r.type == trace::RecordType::kGpuTiming) {
      if (const auto* g = r.as<trace::GpuTimingRecord>()) on_timing(*g);
    }
  }

  // The end of the file: every launch still waiting, oldest first.
  void finish() {
    while (live_ > 0) give_up(head_, NoTiming::kFileEnded);
  }

  uint64_t timing_records() const { return timing_records_; }
  uint64_t orphan_timings() const { return orphan_timings_; }  // of launches never seen (or given up)

 private:
  static constexpr uint64_t kNone = LaunchIndex::kNone;
  // A launch waiting for its timing. Its slot in the ring is reused once it is done, ops' memory
  // and all (no allocation per op).
  struct Launch {
    uint64_t id = 0;
    bool live = false;
    bool promised = false;
    uint32_t ops_added = 0;  // on every stream, those timed already included
    uint16_t api = 0;
    int32_t nranks = 0;
    int64_t host_begin = 0;
    uint64_t first_stream = 0;
    Order::Place place;  // where it came in its communicator's and its stream's order
    std::vector<Tag> tags;          // its ops'
    std::vector<uint64_t> streams;  // their streams, parallel to tags
  };

  void on_op(const trace::OpRecord& record, const RecordView& r) {
    auto api = static_cast<trace::Api>(record.api);
    if (api == trace::Api::kGroupEnd) return end_group(record);
    if (!trace::is_collective(api) && !trace::is_point_to_point(api)) return;
    trace::OpRecord o = record;
    // Every launch that runs now takes its place in its communicator's and its stream's order,
    // timed or not (an untimed one in between leaves the next one's wait unknown).
    Order::Place place = (o.flags & trace::kOpCaptured) ? Order::Place{} : order_.take_place(o);
    bool awaits = awaits_launch_timing(o);
    std::optional<Tag> tag = sink_.on_op(o, r, awaits);
    if (awaits && tag) wait(o, std::move(*tag), place);
  }

  void wait(const trace::OpRecord& o, Tag&& tag, const Order::Place& place) {
    uint64_t arrival = find(o.launch_id);
    if (arrival == kNone) {
      arrival = append(o.launch_id);
      Launch& fresh = slot(arrival);
      fresh.api = o.api;
      fresh.nranks = o.nranks;
      fresh.host_begin = o.host_begin_ns;
      fresh.first_stream = o.stream;
      fresh.place = place;
    }
    Launch& l = slot(arrival);
    l.promised |= (o.flags & trace::kOpTimed) != 0;
    ++l.ops_added;
    l.tags.push_back(std::move(tag));
    l.streams.push_back(o.stream);
    if (early_kept_ > 0 && o.group_depth == 0) take_early_timing(o);
    if (live_ > capacity_) give_up(head_, NoTiming::kGivenUp);
  }

  // A lone op whose launch's timing came before it (see the rules above).
  void take_early_timing(const trace::OpRecord& o) {
    for (size_t i = 0; i < early_kept_; ++i) {
      const trace::GpuTimingRecord& g = early_[i];
      if (g.launch_id != o.launch_id || g.stream != o.stream || g.gpu_end_ns < o.host_begin_ns) continue;
      trace::GpuTimingRecord taken = g;
      early_[i] = early_[--early_kept_];
      --orphan_timings_;
      --timing_records_;  // counted again as it is taken
      return on_timing(taken);
    }
  }

  // A group's end: a timing of its launch follows (kOpTimed), or its ops get none.
  void end_group(const trace::OpRecord& o) {
    uint64_t arrival = find(o.launch_id);
    if (arrival == kNone) return;
    if (o.flags & trace::kOpTimed) slot(arrival).promised = true;
    else give_up(arrival, NoTiming::kUntimedGroup);
  }

  void on_timing(const trace::GpuTimingRecord& g) {
    ++timing_records_;
    uint64_t arrival = find(g.launch_id);
    if (arrival == kNone) {
      ++orphan_timings_;
      if (early_kept_ < kEarlyTimingsKept) early_[early_kept_++] = g;
      else early_[early_next_++ % kEarlyTimingsKept] = g;
      return;
    }
    Launch& l = slot(arrival);
    LaunchTiming t;
    t.gpu_begin = g.flags & trace::kTimingHasBegin;
    t.alike = g.flags & trace::kTimingAlike;
    t.begin_ns = t.gpu_begin ? g.gpu_begin_ns : l.host_begin;
    t.end_ns = g.gpu_end_ns;
    t.launch_ops = l.ops_added;
    t.launch_api = l.api;
    t.launch_nranks = l.nranks;
    // The launch's place in the order is its first op's, on that op's stream.
    if (g.stream == l.first_stream) order_.on_timing(l.place, t);
    auto on_stream = static_cast<size_t>(std::count(l.streams.begin(), l.streams.end(), g.stream));
    t.stream_named = on_stream > 0;
    if (on_stream == 0 || on_stream == l.tags.size()) {
      release(arrival);  // before the sink runs: it may not look at this launch again (its ops stay till the slot is reused)
      sink_.on_timed(std::span<const Tag>(l.tags), t);
      return;
    }
    tags_.clear();
    size_t kept = 0;
    for (size_t i = 0; i < l.tags.size(); ++i) {
      if (l.streams[i] == g.stream) {
        tags_.push_back(std::move(l.tags[i]));
        continue;
      }
      l.tags[kept] = std::move(l.tags[i]);
      l.streams[kept++] = l.streams[i];
    }
    l.tags.resize(kept);
    l.streams.resize(kept);
    sink_.on_timed(std::span<const Tag>(tags_), t);
  }

  // The launch at `arrival` gets no timing: its ops are handed on so, and it is done.
  void give_up(uint64_t arrival, NoTiming why) {
    Launch& l = slot(arrival);
    release(arrival);
    sink_.on_no_timing(std::span<const Tag>(l.tags), l.promised, why);
  }

  // The ring: the launches in arrival order, slot(a) holding arrival a for a in [head_, tail_).
  // head_ is live (or tail_): done launches before the oldest live one are passed over at once.
  Launch& slot(uint64_t arrival) { return ring_[arrival & (ring_.size() - 1)]; }

  // The usual cases first: a group's next op (the newest launch), a timing of the oldest.
  uint64_t find(uint64_t id) {
    if (live_ == 0) return kNone;
    if (Launch& newest = slot(tail_ - 1); newest.live && newest.id == id) return tail_ - 1;
    if (slot(head_).id == id) return head_;
    return index_.find(id);
  }

  uint64_t append(uint64_t id) {
    if (tail_ - head_ == ring_.size()) make_room();
    uint64_t arrival = tail_++;
    Launch& l = slot(arrival);
    l.id = id;
    l.live = true;
    l.promised = false;
    l.ops_added = 0;
    l.tags.clear();
    l.streams.clear();
    index_.insert(id, arrival);
    ++live_;
    return arrival;
  }

  void release(uint64_t arrival) {
    Launch& l = slot(arrival);
    l.live = false;
    index_.erase(l.id);
    --live_;
    while (head_ < tail_ && !slot(head_).live) ++head_;
  }

  // The ring is full: at most half of it live (timings came out of order, the oldest still waits),
  // the live ones close up; else it doubles.
  void make_room() {
    if (!ring_.empty() && live_ * 2 <= ring_.size()) {
      uint64_t to = head_;
      for (uint64_t from = head_; from < tail_; ++from) {
        if (!slot(from).live) continue;
        if (to != from) {
          std::swap(slot(to), slot(from));
          index_.set(slot(to).id, to);
        }
        ++to;
      }
      tail_ = to;
      return;
    }
    std::vector<Launch> bigger(std::max<size_t>(16, ring_.size() * 2));
    for (uint64_t a = head_; a < tail_; ++a) std::swap(bigger[a & (bigger.size() - 1)], slot(a));
    ring_ = std::move(bigger);
  }

  Sink& sink_;
  size_t capacity_;
  Order order_;
  std::vector<Launch> ring_;  // a power of two
  uint64_t head_ = 0, tail_ = 0;
  size_t live_ = 0;
  LaunchIndex index_;
  std::vector<Tag> tags_;  // the ops of one stream of a launch over several, reused
  std::array<trace::GpuTimingRecord, kEarlyTimingsKept> early_{};  // the latest timings of launches not seen
  size_t early_kept_ = 0, early_next_ = 0;
  uint64_t timing_records_ = 0, orphan_timings_ = 0;
};

}  // namespace ncclwatch::model
