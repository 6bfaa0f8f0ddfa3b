#include "model/lateness_map.h"

#include "model/parallel_for.h"
#include "model/timed_ops.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <span>
#include <utility>

namespace ncclwatch::model {
namespace {

using namespace trace;

void atomic_max(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

// Notes how late each start of a shown communicator's collective in one file was: GPU starts
// from the timing records of its launches, or host enqueue times.
class LatenessScanner {
 public:
  LatenessScanner(std::vector<LatenessMap>& maps, int64_t offset) : maps_(maps), offset_(offset) {}

  void add(const RecordView& r) { timed_ops_.add(r); }
  void finish() { timed_ops_.finish(); }

  // TimedOps' sink
  struct Start {
    size_t map;
    uint64_t seq;
    int32_t rank;
  };
  std::optional<Start> on_op(const OpRecord& o, const RecordView&, bool awaits_timing) {
    if (!is_collective(static_cast<Api>(o.api)) || o.rank < 0 || o.rank >= kMaxPlausibleRanks) return std::nullopt;
    std::optional<Start> timed;
    for (size_t m = 0; m < maps_.size(); ++m) {
      LatenessMap& map = maps_[m];
      if (map.comm_id != o.comm_id || !map.shows(o.seq)) continue;
      if (!map.on_gpu) note(map, o.seq, o.rank, wrap_add(o.host_begin_ns, offset_));
      else if (awaits_timing) timed = Start{m, o.seq, o.rank};  // a communicator has one map
    }
    return timed;
  }
  void on_timed(std::span<const Start> starts, const LaunchTiming& t) {
    if (!t.gpu_begin) return;
    for (const Start& s : starts) note(maps_[s.map], s.seq, s.rank, wrap_add(t.begin_ns, offset_));
  }
  void on_no_timing(std::span<const Start>, bool, NoTiming) {}  // no start to note

 private:
  static void note(LatenessMap& map, uint64_t seq, int32_t rank, int64_t t) {
    int row = map.row_of(rank);
    int64_t first = map.earliest(seq);
    if (row < 0 || first == std::numeric_limits<int64_t>::max()) return;
    atomic_max(map.late[static_cast<size_t>(row) * map.bins + map.bin_of(seq)], std::max<int64_t>(0, wrap_sub(t, first)));
  }

  std::vector<LatenessMap>& maps_;
  int64_t offset_;
  TimedOps<Start, LatenessScanner> timed_ops_{*this};
};

}  // namespace

std::vector<LatenessMap> lateness_maps(const JobAnalysis& a, const HangReport& hang) {
  // The busiest communicators with two ranks or more.
  std::vector<std::pair<uint64_t, uint64_t>> busiest;  // (collectives issued, comm id)
  for (const auto& [id, members] : a.members) {
    uint64_t issued = 0;
    std::set<int32_t> ranks;
    for (const MemberRef& m : members) {
      issued += a.member(m).issued;
      if (a.member(m).rank >= 0) ranks.insert(a.member(m).rank);
    }
    const CommOps* ops = a.comm(id);
    if (id && ranks.size() >= 2 && issued && ops && !ops->slots.empty()) busiest.emplace_back(issued, id);
  }
  std::sort(busiest.begin(), busiest.end(), std::greater<>());
  if (busiest.size() > kMaxHeatmaps) busiest.resize(kMaxHeatmaps);

  std::vector<LatenessMap> maps(busiest.size());
  for (size_t i = 0; i < busiest.size(); ++i) {
    LatenessMap& map = maps[i];
    map.comm_id = busiest[i].second;
    const CommOps& ops = *a.comm(map.comm_id);
    map.first_seq = ops.first_seq;
    map.seqs = ops.slots.size();
    map.bins = std::min<size_t>(kMaxHeatmapBins, map.seqs);
    std::vector<int32_t> present;
    for (const MemberRef& m : a.members.at(map.comm_id)) {
      const RankComm& rc = a.member(m);
      map.nranks = std::max(map.nranks, rc.nranks);
      if (rc.rank >= 0) present.push_back(rc.rank);
    }
    std::sort(present.begin(), present.end());
    present.erase(std::unique(present.begin(), present.end()), present.end());
    map.ranks_present = present.size();
    // On the GPU where the hang report judged stragglers there, so both say the same.
    std::vector<int32_t> keep;
    for (const CommHang& c : hang.comms) {
      if (c.comm_id != map.comm_id) continue;
      map.on_gpu = c.stragglers.on_gpu;
      for (const StragglerRank& r : c.stragglers.ranks)
        if (r.finding) map.flagged.insert(r.rank);
      keep.assign(map.flagged.begin(), map.flagged.end());
      for (const LateArrival& w : c.stragglers.worst) keep.push_back(w.rank);
    }
    // Too many ranks: the stragglers and the worst arrivals stay, then the lowest ranks.
    std::set<int32_t> rows;
    for (int32_t r : keep)
      if (rows.size() < kMaxHeatmapRows && std::binary_search(present.begin(), present.end(), r)) rows.insert(r);
    for (int32_t r : present)
      if (rows.size() < kMaxHeatmapRows) rows.insert(r);
    map.rows.assign(rows.begin(), rows.end());
    map.ops = &ops;
    map.late = std::vector<std::atomic<int64_t>>(map.rows.size() * map.bins);
    for (auto& l : map.late) l.store(-1);
  }
  if (maps.empty()) return maps;

  // The files that hold a member of a shown communicator.
  std::set<size_t> files;
  for (const LatenessMap& map : maps)
    for (const MemberRef& m : a.members.at(map.comm_id)) files.insert(m.process);
  std::vector<size_t> order(files.begin(), files.end());
  unsigned threads = reader_threads(order.size());
  parallel_for(order.size(), threads, [&](size_t k, unsigned) {
    size_t i = order[k];
    LatenessScanner scanner(maps, a.ops[i].clock_offset);
    a.read_again(i, [&](const RecordView& r) { scanner.add(r); });
    scanner.finish();
  });
  return maps;
}

}  // namespace ncclwatch::model
