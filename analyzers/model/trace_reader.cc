#include "model/trace_reader.h"
#include "model/trace_image.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>

namespace ncclwatch::model {
namespace {

using namespace trace;

uint32_t load_u32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

bool known_type(uint16_t type) { return record_fixed_bytes(static_cast<RecordType>(type)) != 0; }

// A header that a writer committed: plausible size, commit mark, fits in the file.
// Inline: twice for every record of every file.
[[gnu::always_inline]] inline bool plausible_header(const std::byte* base, uint64_t offset, uint64_t file_size) {
  if (offset + sizeof(RecordHeader) > file_size) return false;
  uint32_t size = load_u32(base + offset);
  uint32_t word = load_u32(base + offset + 4);
  return (word >> 16) == kCommitMark && size >= sizeof(RecordHeader) && size % 8 == 0 &&
         size <= record_largest_bytes(static_cast<uint16_t>(word & 0xffff)) && offset + size <= file_size;
}

// The next offset at or after `from` (in steps of 8) holding a committed header, or the end.
uint64_t resync(const TraceImage& image, uint64_t from) {
  uint64_t file_size = image.size();
  if (from + sizeof(RecordHeader) > file_size) return file_size;
  uint64_t found = file_size;
  image.for_each_item_with_data(from, 8, (file_size - from) / 8, [&](uint64_t first, uint64_t end) {
    for (uint64_t k = first; k < end; ++k)
      if (plausible_header(image.data(), from + 8 * k, file_size)) {
        found = from + 8 * k;
        return false;
      }
    return true;
  });
  return found;
}

// Whether [from, to) holds nothing but zeros (its holes do).
bool all_zero(const TraceImage& image, uint64_t from, uint64_t to) {
  return image.for_each_item_with_data(from, 8, (to - from) / 8, [&](uint64_t first, uint64_t end) {
    for (uint64_t k = first; k < end; ++k)
      if (load_u32(image.data() + from + 8 * k) != 0 || load_u32(image.data() + from + 8 * k + 4) != 0) return false;
    return true;
  });
}

// The header's host name as valid UTF-8, in place: cut at a character boundary to fit the field.
void make_host_valid(FileHeader& header) {
  std::string host = valid_utf8(std::string_view(header.host, strnlen(header.host, sizeof(header.host))));
  size_t fit = std::min(host.size(), sizeof(header.host) - 1);
  while (fit > 0 && fit < host.size() && (static_cast<unsigned char>(host[fit]) & 0xC0) == 0x80) --fit;
  std::memset(header.host, 0, sizeof(header.host));
  std::memcpy(header.host, host.data(), fit);
}

}  // namespace

TraceProblem trace_problem(const std::string& path, std::string what, bool fatal) {
  return {valid_utf8(path), std::move(what), fatal};
}

int32_t ImplausibleValues::nranks(int32_t claimed, const RecordView& r) {
  if (claimed <= kMaxPlausibleRanks) return claimed;
  note("nranks " + std::to_string(claimed) + " (more than " + std::to_string(kMaxPlausibleRanks) +
           " ranks), taken as unknown",
       r);
  return -1;
}

int32_t ImplausibleValues::rank(int32_t claimed, const RecordView& r) {
  if (claimed >= -1 && claimed < kMaxPlausibleRanks) return claimed;
  note("rank " + std::to_string(claimed) + ", taken as unknown", r);
  return -1;
}

void ImplausibleValues::note(const std::string& what, const RecordView& r) {
  if (count_++ == 0)
    first_ = "implausible " + what + " (" + record_type_name(r.type) + " record at offset " + std::to_string(r.offset) + ")";
}

void ImplausibleValues::report(const std::string& path, std::vector<TraceProblem>& problems) const {
  if (!count_) return;
  std::string what = first_;
  if (count_ > 1) what += "; " + std::to_string(count_ - 1) + " more implausible value(s) in this file";
  problems.push_back(trace_problem(path, what, false));
}

namespace {

// The part of a ring chunk or totals record before its slots or entries.
constexpr uint64_t kStorageHeadBytes = std::max<uint64_t>(kRingChunkHeaderBytes, kOpTotalsHeaderBytes);

// Steps through the records from `offset`, handing each committed one to `visit` (false stops);
// counts holes, torn records and corrupt spans. Returns false when `visit` stopped it.
template <class Visit>
bool scan_records(const TraceImage& image, uint64_t offset, ReadStats& stats, uint64_t& corrupt_spans, Visit&& visit) {
  uint64_t file_size = image.size();
  const std::byte* data = image.data();
  while (offset + sizeof(RecordHeader) <= file_size) {
    if (!image.read_through(offset + sizeof(RecordHeader))) return true;  // the rest of a prefix is not read yet
    uint32_t size = load_u32(data + offset);
    uint32_t word = load_u32(data + offset + 4);
    if (plausible_header(data, offset, file_size)) {
      uint16_t type = static_cast<uint16_t>(word & 0xffff);
      // Of a prefix read so far, a record only partly read ends it (a ring chunk's slots are read
      // as far as they are there).
      bool storage = record_largest_bytes(type) > kMaxRecordBytes;
      if (!image.read_through(offset + (storage ? std::min<uint64_t>(size, kStorageHeadBytes) : size))) return true;
      if (known_type(type) && type != static_cast<uint16_t>(RecordType::kPadding)) {
        if (!visit(RecordView{static_cast<RecordType>(type), data + offset, size, offset})) return false;
      }
      offset += size;
      continue;
    }
    if (word == 0 && size >= sizeof(RecordHeader) && size % 8 == 0 && size <= kMaxChunkRecordBytes &&
        offset + size <= file_size) {
      // Reserved and sized but never committed: its writer died mid-record. Step over it.
      ++stats.torn_records;
      offset += size;
      continue;
    }
    uint64_t next = resync(image, offset + 8);
    if (!all_zero(image, offset, next)) ++corrupt_spans;
    if (next < file_size) stats.skipped_bytes += next - offset;
    offset = next;
  }
  return true;
}

// When a history record was written, for placing the ring's records among them: the member the
// record table names (trace_format.h); none for the types it marks untimed.
template <class Struct> std::optional<int64_t> time_in(const RecordView& r, int64_t Struct::*time) {
  if (const auto* e = r.as<Struct>()) return e->*time;
  return std::nullopt;
}
template <class Struct> std::optional<int64_t> time_in(const RecordView&, std::nullptr_t) { return std::nullopt; }

std::optional<int64_t> record_time(const RecordView& r) {
  switch (r.type) {
#define NCCLWATCH_RECORD_TIME(Id, value, name, Struct, time, largest) \
  case RecordType::k##Id:                                             \
    return time_in<Struct>(r, NCCLWATCH_TIME_OF_##time(Struct));
    NCCLWATCH_RECORD_TYPES(NCCLWATCH_RECORD_TIME)
#undef NCCLWATCH_RECORD_TIME
  }
  return std::nullopt;
}

// The names a format-4 file's ring slots and totals refer to by index: communicators, streams,
// threads (CommRef, StreamRef, ThreadRef records). Kept by the indices the records claim (sparse:
// a record may name any index).
class RingNames {
 public:
  void note(const RecordView& r) {
    switch (r.type) {
      case RecordType::kCommRef:
        if (auto* c = r.as<CommRefRecord>(); c && c->index > 0) comms_[c->index] = *c;
        break;
      case RecordType::kStreamRef:
        if (auto* c = r.as<StreamRefRecord>(); c && c->index > 0 && c->index <= 0xffff) streams_[c->index] = c->stream;
        break;
      case RecordType::kThreadRef:
        if (auto* c = r.as<ThreadRefRecord>()) threads_[c->launch_prefix] = c->tid;
        break;
      default: break;
    }
  }

  const CommRefRecord* comm_ref(uint32_t index) const {
    if (!index) return nullptr;
    auto it = comms_.find(index);
    return it == comms_.end() ? nullptr : &it->second;
  }
  uint64_t stream_of(uint16_t index) const {
    auto it = index ? streams_.find(index) : streams_.end();
    return it == streams_.end() ? 0 : it->second;
  }
  uint32_t thread_of(uint64_t launch_prefix) const {
    auto it = threads_.find(launch_prefix);
    return it == threads_.end() ? 0 : it->second;
  }

 private:
  std::unordered_map<uint32_t, CommRefRecord> comms_;
  std::unordered_map<uint16_t, uint64_t> streams_;
  std::unordered_map<uint64_t, uint32_t> threads_;
};

// The op totals tables of a format-4 file (OpTotals records): where their entries lie, read when
// asked for, each as one row naming its communicator.
class TotalsTables {
 public:
  TotalsTables(const TraceImage& image, const RingNames& names) : image_(image), names_(names) {}

  void note(const RecordView& r) {
    if (auto* t = r.as<OpTotalsRecord>()) {
      uint64_t fits = (r.size - std::min<uint64_t>(r.size, kOpTotalsHeaderBytes)) / sizeof(OpTotalsEntry);
      tables_.push_back({r.offset + kOpTotalsHeaderBytes, std::min<uint64_t>(t->entries, fits)});
    }
  }

  // Its rows: the overflow entry where it counted calls, then the entries made ready.
  std::vector<OpTotalsRow> rows() const {
    std::vector<OpTotalsRow> rows;
    for (const auto& [offset, n] : tables_) {
      const auto* entries = reinterpret_cast<const OpTotalsEntry*>(image_.data() + offset);
      image_.for_each_item_with_data(offset, sizeof(OpTotalsEntry), n, [&](uint64_t first, uint64_t end) {
        for (uint64_t i = first; i < end; ++i) add_totals_row(entries[i], i == 0, rows);
        return true;
      });
    }
    return rows;
  }

 private:
  void add_totals_row(const OpTotalsEntry& e, bool overflow, std::vector<OpTotalsRow>& rows) const {
    if (overflow ? e.calls == 0 : !e.ready) return;
    OpTotalsRow row{};
    row.h = {sizeof(OpTotalsRow), static_cast<uint16_t>(RecordType::kOpTotals), kCommitMark};
    row.rank = row.nranks = -1;
    if (const CommRefRecord* ref = overflow ? nullptr : names_.comm_ref(e.comm_index)) {
      row.comm_id = ref->comm_id;
      row.comm = ref->comm;
      row.rank = ref->rank;
      row.nranks = ref->nranks;
    }
    row.count = e.count;
    row.api = e.api;
    row.datatype = e.datatype;
    row.overflow = overflow;
    row.calls = e.calls;
    row.host_ns = e.host_ns;
    row.gpu_timed = e.gpu_timed;
    row.gpu_ns = e.gpu_ns;
    row.first_ns = e.first_ns;
    row.last_ns = e.last_ns;
    std::memcpy(row.gpu_histogram, e.gpu_histogram, sizeof(row.gpu_histogram));
    rows.push_back(row);
  }

  const TraceImage& image_;
  const RingNames& names_;
  std::vector<std::pair<uint64_t, uint64_t>> tables_;  // (offset of the first entry, entries)
};

// What a first pass over a format-4 file learns: where the ring's chunks are (and, in RingNames and
// TotalsTables, the names its slots refer to and the totals tables). Its work and memory follow the
// file's data: only the chunks the file holds, and of them only the slots that hold data, are ever
// visited, whatever ring size a chunk claims (chunks the first lap never reached are legitimately
// absent).
class RingIndex {
 public:
  explicit RingIndex(const TraceImage& image) : image_(image), totals_(image, names_) {}

  std::vector<OpTotalsRow> totals_rows() const { return totals_.rows(); }

  struct Chunk {
    uint64_t offset = 0;  // of its first slot in the file; 0: the file does not hold this chunk
  };

  // The records note() takes: the first pass hands it only these (it sees every record).
  static constexpr bool notes(RecordType type) {
    switch (type) {
      case RecordType::kRingChunk:
      case RecordType::kOpTotals:
      case RecordType::kCommRef:
      case RecordType::kStreamRef:
      case RecordType::kThreadRef: return true;
      default: return false;
    }
  }

  // Ring chunks and totals tables: read through the index, never delivered as they are.
  static bool is_storage(const RecordView& r) {
    return record_largest_bytes(static_cast<uint16_t>(r.type)) > kMaxRecordBytes;
  }

  void note(const RecordView& r, const std::string& path, std::vector<TraceProblem>& problems) {
    switch (r.type) {
      case RecordType::kRingChunk: note_chunk(r, path, problems); break;
      case RecordType::kOpTotals: totals_.note(r); break;
      case RecordType::kCommRef:
      case RecordType::kStreamRef:
      case RecordType::kThreadRef: names_.note(r); break;
      default: break;
    }
  }

  // The slots that hold data, and of them the newest written: the window of the last ring_slots
  // indices.
  void find_window(ReadStats& stats) {
    if (chunks_.empty()) return;
    for (uint64_t ordinal = 0; ordinal < chunks_.size(); ++ordinal) {
      if (!chunks_[ordinal].offset) continue;
      image_.for_each_item_with_data(chunks_[ordinal].offset, kRingSlotBytes, chunk_slots_, [&](uint64_t first, uint64_t end) {
        present_.push_back({ordinal * chunk_slots_ + first, ordinal * chunk_slots_ + end});
        return true;
      });
    }
    bool any = false;
    for (const PositionRun& run : present_)
      for (uint64_t position = run.begin; position < run.end; ++position) {
        uint64_t stamp = slot_at(position)->stamp;
        if (!valid(stamp, position)) continue;
        newest_ = std::max(newest_, ring_stamp_index(stamp));
        any = true;
      }
    if (!any) {
      chunks_.clear();
      present_.clear();
      return;
    }
    oldest_ = newest_ + 1 > ring_slots_ ? newest_ + 1 - ring_slots_ : 0;
    stats.ring_slots = ring_slots_;
    stats.ring_written = newest_ + 1;
  }

  bool empty() const { return chunks_.empty(); }

  // The first index from `index` on whose slot holds data (the window's others are holes or
  // chunks the file lacks), or UINT64_MAX when there is none.
  uint64_t next_with_data(uint64_t index) {
    if (present_.empty()) return std::numeric_limits<uint64_t>::max();
    uint64_t position = index % ring_slots_;
    if (run_ >= present_.size() || position < present_[run_].begin || position >= present_[run_].end) {
      run_ = static_cast<size_t>(std::upper_bound(present_.begin(), present_.end(), position,
                                                  [](uint64_t p, const PositionRun& r) { return p < r.end; }) -
                                 present_.begin());
      if (run_ == present_.size()) {
        run_ = 0;  // past the last run: the first one, a lap on
        return index + (ring_slots_ - position) + present_[0].begin;
      }
    }
    return index + (std::max(position, present_[run_].begin) - position);
  }

  // A slot as the full record it stands for, in `out`; false when it holds none.
  bool expand(uint64_t index, RecordView& out) {
    uint64_t position = index % ring_slots_;
    const RingSlot* slot = slot_at(position);
    if (!slot || !valid(slot->stamp, position) || ring_stamp_index(slot->stamp) != index) return false;
    uint64_t offset = chunks_[position / chunk_slots_].offset + (position % chunk_slots_) * kRingSlotBytes;
    if (ring_stamp_kind(slot->stamp) == RingKind::kOp) {
      const CompactOp& c = slot->op;
      OpRecord& o = op_;
      o = OpRecord{};
      o.h = {sizeof(OpRecord), static_cast<uint16_t>(RecordType::kCollective), kCommitMark};
      if (const CommRefRecord* ref = names_.comm_ref(c.comm_index)) {
        o.comm_id = ref->comm_id;
        o.comm = ref->comm;
        o.rank = ref->rank;
        o.nranks = ref->nranks;
      } else {
        o.rank = o.nranks = -1;
      }
      o.seq = c.seq;
      o.count = c.count;
      o.stream = names_.stream_of(c.stream_index);
      o.host_begin_ns = c.host_begin_ns;
      uint64_t duration = c.flags & kCompactDurationMicros ? uint64_t{c.host_duration} * 1000 : c.host_duration;
      o.host_end_ns = wrap_add(c.host_begin_ns, static_cast<int64_t>(duration));
      o.launch_id = c.launch_id;
      o.tid = names_.thread_of(c.launch_id >> kLaunchPrefixShift);
      o.api = c.api;
      o.result = c.result;
      o.peer = c.peer;
      o.datatype = c.datatype;
      o.group_depth = c.group_depth;
      o.flags = c.flags & ~kCompactDurationMicros;
      o.redop = c.redop;
      o.graph = c.graph;
      out = RecordView{RecordType::kCollective, reinterpret_cast<const std::byte*>(&op_), sizeof(OpRecord), offset};
      return true;
    }
    const CompactTiming& c = slot->timing;
    GpuTimingRecord& t = timing_;
    t = GpuTimingRecord{};
    t.h = {sizeof(GpuTimingRecord), static_cast<uint16_t>(RecordType::kGpuTiming), kCommitMark};
    t.launch_id = c.launch_id;
    t.stream = c.stream;
    t.gpu_begin_ns = c.gpu_begin_ns;
    t.gpu_end_ns = c.gpu_end_ns;
    t.clock_error_ns = c.clock_error_ns;
    t.ops = c.ops;
    t.flags = c.flags;
    out = RecordView{RecordType::kGpuTiming, reinterpret_cast<const std::byte*>(&timing_), sizeof(GpuTimingRecord), offset};
    return true;
  }

  uint64_t oldest() const { return oldest_; }
  uint64_t newest() const { return newest_; }

 private:
  struct PositionRun {
    uint64_t begin, end;  // ring positions
  };

  void note_chunk(const RecordView& r, const std::string& path, std::vector<TraceProblem>& problems) {
    auto* c = r.as<RingChunkRecord>();
    if (!c) return;
    bool fits = c->slots > 0 && uint64_t{kRingChunkHeaderBytes} + uint64_t{c->slots} * kRingSlotBytes <= r.size;
    bool agrees = fits && (chunks_.empty() ? c->ring_slots > 0 && c->ring_slots % c->slots == 0 &&
                                                 c->ring_slots / c->slots <= kMaxRingChunks
                                           : c->ring_slots == ring_slots_ && c->slots == chunk_slots_);
    if (!agrees || uint64_t{c->ordinal} * c->slots >= c->ring_slots) {
      problems.push_back(trace_problem(path, "ring chunk at offset " + std::to_string(r.offset) +
                                                 " disagrees with the ring's size; its ops are left out", false));
      return;
    }
    if (chunks_.empty()) {
      ring_slots_ = c->ring_slots;
      chunk_slots_ = c->slots;
      chunks_.resize(ring_slots_ / chunk_slots_);
    }
    chunks_[c->ordinal].offset = r.offset + kRingChunkHeaderBytes;
  }

  const RingSlot* slot_at(uint64_t position) const {
    const Chunk& chunk = chunks_[position / chunk_slots_];
    if (!chunk.offset) return nullptr;
    return reinterpret_cast<const RingSlot*>(image_.data() + chunk.offset) + position % chunk_slots_;
  }

  bool valid(uint64_t stamp, uint64_t position) const {
    RingKind kind = ring_stamp_kind(stamp);
    // A stamp below 256 names no index (a writer's stamps are (index + 1) << 8 | kind).
    return (stamp >> 8) != 0 && (kind == RingKind::kOp || kind == RingKind::kGpuTiming) &&
           ring_stamp_index(stamp) % ring_slots_ == position;
  }

  const TraceImage& image_;
  uint64_t ring_slots_ = 0;
  uint64_t chunk_slots_ = 0;
  std::vector<Chunk> chunks_;           // by ordinal: at most kMaxRingChunks
  std::vector<PositionRun> present_;    // the slots that hold data, in position order
  size_t run_ = 0;                      // the run next_with_data looked in last
  uint64_t oldest_ = 0, newest_ = 0;
  RingNames names_;
  TotalsTables totals_;
  OpRecord op_{};
  GpuTimingRecord timing_{};
};

// The ring's window, oldest first, each slot expanded; counts what it delivers as kept.
class RingCursor {
 public:
  RingCursor(RingIndex& ring, ReadStats& stats) : ring_(ring), stats_(stats), next_(ring.oldest()) {}
  bool next(RecordView& out) {
    for (next_ = ring_.next_with_data(next_); next_ <= ring_.newest(); next_ = ring_.next_with_data(next_)) {
      if (ring_.expand(next_++, out)) {
        ++stats_.ring_kept;
        return true;
      }
    }
    return false;
  }
  static int64_t time_of(const RecordView& r) { return record_time(r).value_or(0); }

 private:
  RingIndex& ring_;
  ReadStats& stats_;
  uint64_t next_;
};

}  // namespace

bool read_trace(const std::string& path, const RecordVisitor& visit, FileHeader& header, ReadStats& stats,
                std::vector<TraceProblem>& problems) {
  return read_trace_until(
      path,
      [&](const RecordView& r) {
        visit(r);
        return true;
      },
      header, stats, problems);
}

bool read_trace_until(const std::string& path, const StoppableVisitor& visit, FileHeader& header, ReadStats& stats,
                      std::vector<TraceProblem>& problems) {
  TraceImage image;
  std::string error, lost;
  if (!image.load(path, error, lost)) {
    problems.push_back(trace_problem(path, error, true));
    return false;
  }
  if (!lost.empty()) problems.push_back(trace_problem(path, lost, false));
  return read_trace_image(image, path, visit, header, stats, problems);
}

bool read_trace_image(const TraceImage& image, const std::string& path, const StoppableVisitor& visit, FileHeader& header,
                      ReadStats& stats, std::vector<TraceProblem>& problems) {
  auto fail = [&](const std::string& what) {
    problems.push_back(trace_problem(path, what, true));
    return false;
  };
  uint64_t file_size = image.size();
  const std::byte* data = image.data();

  if (file_size < sizeof(kMagic) || std::memcmp(data, kMagic, sizeof(kMagic)) != 0) {
    if (file_size >= sizeof(kMagic) && std::all_of(data, data + sizeof(kMagic), [](std::byte b) { return b == std::byte{0}; }))
      return fail("no trace header (the writer died before finishing it)");
    return fail("not an ncclwatch trace (bad magic)");
  }
  if (file_size < sizeof(FileHeader)) return fail("truncated inside the file header");
  std::memcpy(&header, data, sizeof(FileHeader));
  make_host_valid(header);
  if (header.min_reader_version > kVersion)
    return fail("written by a newer ncclwatch (format " + std::to_string(header.version) + ", needs a reader of format " +
                std::to_string(header.min_reader_version) + "; this one reads format " + std::to_string(kVersion) + ")");
  if (header.version < kOldestReadableFormat)
    return fail("written in trace format " + std::to_string(header.version) + ", older than this reader reads (" +
                std::to_string(kOldestReadableFormat) + " to " + std::to_string(kVersion) + ")");
  if (header.header_bytes < sizeof(FileHeader) || header.header_bytes > file_size || header.header_bytes % 8)
    return fail("invalid header size " + std::to_string(header.header_bytes));

  uint64_t corrupt_spans = 0;
  RingIndex ring(image);
  auto deliver = [&](const RecordView& r) {
    ++stats.records;
    return visit(r);
  };
  if (header.version >= 4) {
    ReadStats first_pass;
    uint64_t ignored = 0;
    scan_records(image, header.header_bytes, first_pass, ignored, [&](const RecordView& r) {
      if (RingIndex::notes(r.type)) ring.note(r, path, problems);
      return true;
    });
    ring.find_window(stats);
  }
  bool finished = true;
  if (ring.empty()) {
    finished = scan_records(image, header.header_bytes, stats, corrupt_spans, [&](const RecordView& r) {
      return ring.is_storage(r) || deliver(r);
    });
  } else {
    // The ring's records, in the order written, each before the first other record later than it.
    RingCursor cursor(ring, stats);
    RecordView op{};
    bool have_op = cursor.next(op);
    int64_t history_time = std::numeric_limits<int64_t>::min();
    finished = scan_records(image, header.header_bytes, stats, corrupt_spans, [&](const RecordView& r) {
      if (ring.is_storage(r)) return true;
      history_time = std::max(history_time, record_time(r).value_or(history_time));
      while (have_op && RingCursor::time_of(op) < history_time) {
        if (!deliver(op)) return false;
        have_op = cursor.next(op);
      }
      return deliver(r);
    });
    while (finished && have_op) {
      if (!deliver(op)) {
        finished = false;
        break;
      }
      have_op = cursor.next(op);
    }
  }
  if (finished) {
    for (const OpTotalsRow& row : ring.totals_rows()) {
      RecordView r{RecordType::kOpTotals, reinterpret_cast<const std::byte*>(&row), sizeof(row), 0};
      if (!deliver(r)) {
        finished = false;
        break;
      }
    }
  }
  if (!finished) return true;
  if (corrupt_spans)
    problems.push_back(trace_problem(path,
                                     std::to_string(corrupt_spans) + " corrupt span(s) skipped (" +
                                         std::to_string(stats.skipped_bytes) + " bytes); the records around them were read",
                                     false));
  if (stats.torn_records)
    problems.push_back(trace_problem(
        path, std::to_string(stats.torn_records) + " record(s) left half-written by the dying process", false));
  // A header alone says nothing about NCCL: reporting "no leaks" from it would be a false all-clear.
  if (stats.records == 0) return fail("holds no records (the process died before recording anything, or recorded nothing)");
  return true;
}

}  // namespace ncclwatch::model
