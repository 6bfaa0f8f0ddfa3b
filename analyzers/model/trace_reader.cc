#include "trace_reader.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

namespace ncclwatch::report {
namespace {

using namespace trace;

struct Mapping {
  const std::byte* data = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (data) munmap(const_cast<std::byte*>(data), size);
  }
};

uint32_t load_u32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

bool known_type(uint16_t type) {
  switch (static_cast<RecordType>(type)) {
#define NCCLWATCH_RECORD_KNOWN(Id, value, name) case RecordType::k##Id:
    NCCLWATCH_RECORD_TYPES(NCCLWATCH_RECORD_KNOWN)
#undef NCCLWATCH_RECORD_KNOWN
      return true;
  }
  return false;
}

uint32_t max_record_bytes(uint16_t type) {
  bool chunk = type == static_cast<uint16_t>(RecordType::kRingChunk) || type == static_cast<uint16_t>(RecordType::kOpTotals);
  return chunk ? kMaxChunkRecordBytes : kMaxRecordBytes;
}

// A header that a writer committed: plausible size, commit mark, fits in the file.
bool plausible_header(const std::byte* base, uint64_t offset, uint64_t file_size) {
  if (offset + sizeof(RecordHeader) > file_size) return false;
  uint32_t size = load_u32(base + offset);
  uint32_t word = load_u32(base + offset + 4);
  return (word >> 16) == kCommitMark && size >= sizeof(RecordHeader) && size % 8 == 0 &&
         size <= max_record_bytes(static_cast<uint16_t>(word & 0xffff)) && offset + size <= file_size;
}

// The next offset at or after `from` holding a committed header, or file_size.
uint64_t resync(const std::byte* base, uint64_t from, uint64_t file_size) {
  for (uint64_t at = from; at + sizeof(RecordHeader) <= file_size; at += 8)
    if (plausible_header(base, at, file_size)) return at;
  return file_size;
}

// Length of the valid UTF-8 sequence that starts at s[i] (RFC 3629: no overlong forms, no
// surrogates, nothing past U+10FFFF), 0 when none does.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char second_min = 0x80, second_max = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_min = 0xA0;  // overlong
    if (lead == 0xED) second_max = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_min = 0x90;  // overlong
    if (lead == 0xF4) second_max = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + length > s.size() || byte(i + 1) < second_min || byte(i + 1) > second_max) return 0;
  for (size_t k = 2; k < length; ++k)
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  return length;
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

std::string valid_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    if (size_t n = utf8_sequence_length(bytes, i)) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      ++i;
    }
  }
  return out;
}

std::string record_text(const std::byte* p, size_t len) {
  return valid_utf8(std::string_view(reinterpret_cast<const char*>(p), len));
}

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

// Steps through the records from `offset`, handing each committed one to `visit` (false stops);
// counts holes, torn records and corrupt spans. Returns false when `visit` stopped it.
template <class Visit>
bool scan_records(const Mapping& map, uint64_t offset, ReadStats& stats, uint64_t& corrupt_spans, Visit&& visit) {
  uint64_t file_size = map.size;
  while (offset + sizeof(RecordHeader) <= file_size) {
    uint32_t size = load_u32(map.data + offset);
    uint32_t word = load_u32(map.data + offset + 4);
    if (plausible_header(map.data, offset, file_size)) {
      uint16_t type = static_cast<uint16_t>(word & 0xffff);
      if (known_type(type) && type != static_cast<uint16_t>(RecordType::kPadding)) {
        if (!visit(RecordView{static_cast<RecordType>(type), map.data + offset, size, offset})) return false;
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
    uint64_t next = resync(map.data, offset + 8, file_size);
    bool all_zero = true;
    for (uint64_t at = offset; at < next && all_zero; at += 8) all_zero = load_u32(map.data + at) == 0 && load_u32(map.data + at + 4) == 0;
    if (!all_zero) ++corrupt_spans;
    if (next < file_size) stats.skipped_bytes += next - offset;
    offset = next;
  }
  return true;
}

// When a history record was written, for placing the ring's records among them; none for the
// records without a time (modules, libraries' strings have one).
std::optional<int64_t> record_time(const RecordView& r) {
  switch (r.type) {
    case RecordType::kCallBegin:
    case RecordType::kCallEnd:
      if (auto* e = r.as<ApiEvent>()) return e->time_ns;
      break;
    case RecordType::kProcess:
    case RecordType::kLibrary:
    case RecordType::kNotice:
      if (auto* e = r.as<StringsRecord>()) return e->time_ns;
      break;
    case RecordType::kExitBegin:
    case RecordType::kProcessEnd:
      if (auto* e = r.as<ExitRecord>()) return e->time_ns;
      break;
    case RecordType::kLost:
      if (auto* e = r.as<LostRecord>()) return e->time_ns;
      break;
    case RecordType::kStall:
      if (auto* e = r.as<StallRecord>()) return e->time_ns;
      break;
    case RecordType::kCollective:
      if (auto* e = r.as<OpRecord>()) return e->host_end_ns;
      break;
    case RecordType::kGpuTiming:
      if (auto* e = r.as<GpuTimingRecord>()) return e->gpu_end_ns;
      break;
    case RecordType::kCommRef:
      if (auto* e = r.as<CommRefRecord>()) return e->time_ns;
      break;
    case RecordType::kStreamRef:
      if (auto* e = r.as<StreamRefRecord>()) return e->time_ns;
      break;
    case RecordType::kThreadRef:
      if (auto* e = r.as<ThreadRefRecord>()) return e->time_ns;
      break;
    default: break;
  }
  return std::nullopt;
}

// What a first pass over a format-4 file learns: where the ring's chunks are, the names its
// slots refer to, the totals tables.
class RingIndex {
 public:
  struct Chunk {
    const RingSlot* slots = nullptr;
    uint64_t offset = 0;  // of the first slot in the file
  };

  static bool is_storage(const RecordView& r) {
    return r.type == RecordType::kRingChunk || r.type == RecordType::kOpTotals;
  }

  void note(const RecordView& r, const std::string& path, std::vector<TraceProblem>& problems) {
    switch (r.type) {
      case RecordType::kRingChunk: note_chunk(r, path, problems); break;
      case RecordType::kOpTotals:
        if (auto* t = r.as<OpTotalsRecord>()) {
          uint64_t fits = (r.size - std::min<uint64_t>(r.size, kOpTotalsHeaderBytes)) / sizeof(OpTotalsEntry);
          totals_.push_back({reinterpret_cast<const OpTotalsEntry*>(r.data + kOpTotalsHeaderBytes),
                             std::min<uint64_t>(t->entries, fits)});
        }
        break;
      case RecordType::kCommRef:
        if (auto* c = r.as<CommRefRecord>(); c && c->index > 0 && c->index < kMaxRefs) {
          if (comms_.size() <= c->index) comms_.resize(c->index + 1);
          comms_[c->index] = *c;
        }
        break;
      case RecordType::kStreamRef:
        if (auto* c = r.as<StreamRefRecord>(); c && c->index > 0 && c->index <= 0xffff) {
          if (streams_.size() <= c->index) streams_.resize(c->index + 1);
          streams_[c->index] = c->stream;
        }
        break;
      case RecordType::kThreadRef:
        if (auto* c = r.as<ThreadRefRecord>(); c && c->launch_prefix < kMaxRefs) {
          if (threads_.size() <= c->launch_prefix) threads_.resize(c->launch_prefix + 1);
          threads_[c->launch_prefix] = c->tid;
        }
        break;
      default: break;
    }
  }

  // The newest slot written, and so the window of the last ring_slots indices.
  void find_window(ReadStats& stats) {
    if (chunks_.empty()) return;
    bool any = false;
    for (uint64_t position = 0; position < ring_slots_; ++position) {
      const RingSlot* slot = slot_at(position);
      if (!slot) continue;
      uint64_t stamp = slot->stamp;
      if (!valid(stamp, position)) continue;
      newest_ = std::max(newest_, ring_stamp_index(stamp));
      any = true;
    }
    if (!any) {
      chunks_.clear();
      return;
    }
    oldest_ = newest_ + 1 > ring_slots_ ? newest_ + 1 - ring_slots_ : 0;
    stats.ring_slots = ring_slots_;
    stats.ring_written = newest_ + 1;
  }

  bool empty() const { return chunks_.empty(); }

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
      if (c.comm_index && c.comm_index < comms_.size() && comms_[c.comm_index].index) {
        const CommRefRecord& ref = comms_[c.comm_index];
        o.comm_id = ref.comm_id;
        o.comm = ref.comm;
        o.rank = ref.rank;
        o.nranks = ref.nranks;
      } else {
        o.rank = o.nranks = -1;
      }
      o.seq = c.seq;
      o.count = c.count;
      o.stream = c.stream_index < streams_.size() ? streams_[c.stream_index] : 0;
      o.host_begin_ns = c.host_begin_ns;
      uint64_t duration = c.flags & kCompactDurationMicros ? uint64_t{c.host_duration} * 1000 : c.host_duration;
      o.host_end_ns = wrap_add(c.host_begin_ns, static_cast<int64_t>(duration));
      o.launch_id = c.launch_id;
      uint64_t prefix = c.launch_id >> kLaunchPrefixShift;
      o.tid = prefix < threads_.size() ? threads_[prefix] : 0;
      o.api = c.api;
      o.result = c.result;
      o.peer = c.peer;
      o.datatype = c.datatype;
      o.group_depth = c.group_depth;
      o.flags = c.flags & ~kCompactDurationMicros;
      o.redop = c.redop;
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

  std::vector<OpTotalsRow> totals_rows() const {
    std::vector<OpTotalsRow> rows;
    for (const auto& [entries, n] : totals_) {
      for (uint64_t i = 0; i < n; ++i) {
        const OpTotalsEntry& e = entries[i];
        bool overflow = i == 0;
        if (overflow ? e.calls == 0 : !e.ready) continue;
        OpTotalsRow row{};
        row.h = {sizeof(OpTotalsRow), static_cast<uint16_t>(RecordType::kOpTotals), kCommitMark};
        row.rank = row.nranks = -1;
        if (!overflow && e.comm_index && e.comm_index < comms_.size() && comms_[e.comm_index].index) {
          const CommRefRecord& ref = comms_[e.comm_index];
          row.comm_id = ref.comm_id;
          row.comm = ref.comm;
          row.rank = ref.rank;
          row.nranks = ref.nranks;
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
    }
    return rows;
  }

 private:
  static constexpr uint64_t kMaxRefs = 1u << 24;

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
    chunks_[c->ordinal] = {reinterpret_cast<const RingSlot*>(r.data + kRingChunkHeaderBytes),
                           r.offset + kRingChunkHeaderBytes};
  }

  const RingSlot* slot_at(uint64_t position) const {
    const Chunk& chunk = chunks_[position / chunk_slots_];
    return chunk.slots ? chunk.slots + position % chunk_slots_ : nullptr;
  }

  bool valid(uint64_t stamp, uint64_t position) const {
    RingKind kind = ring_stamp_kind(stamp);
    // A stamp below 256 names no index (a writer's stamps are (index + 1) << 8 | kind).
    return (stamp >> 8) != 0 && (kind == RingKind::kOp || kind == RingKind::kGpuTiming) &&
           ring_stamp_index(stamp) % ring_slots_ == position;
  }

  uint64_t ring_slots_ = 0;
  uint64_t chunk_slots_ = 0;
  std::vector<Chunk> chunks_;
  uint64_t oldest_ = 0, newest_ = 0;
  std::vector<std::pair<const OpTotalsEntry*, uint64_t>> totals_;
  std::vector<CommRefRecord> comms_;
  std::vector<uint64_t> streams_;
  std::vector<uint32_t> threads_;
  OpRecord op_{};
  GpuTimingRecord timing_{};
};

// The ring's window, oldest first, each slot expanded; counts what it delivers as kept.
class RingCursor {
 public:
  RingCursor(RingIndex& ring, ReadStats& stats) : ring_(ring), stats_(stats), next_(ring.oldest()) {}
  bool next(RecordView& out) {
    while (next_ <= ring_.newest()) {
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
  auto fail = [&](const std::string& what) {
    problems.push_back(trace_problem(path, what, true));
    return false;
  };
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(std::string("cannot open: ") + std::strerror(errno));
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fail("not a regular file");
  }
  size_t file_size = static_cast<size_t>(st.st_size);
  if (file_size == 0) {
    close(fd);
    return fail("empty file");
  }
  Mapping map;
  void* data = mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (data == MAP_FAILED) return fail(std::string("cannot map: ") + std::strerror(errno));
  map.data = static_cast<const std::byte*>(data);
  map.size = file_size;
  madvise(data, file_size, MADV_SEQUENTIAL);

  if (file_size < sizeof(kMagic) || std::memcmp(map.data, kMagic, sizeof(kMagic)) != 0) {
    if (file_size >= sizeof(kMagic) && std::all_of(map.data, map.data + sizeof(kMagic), [](std::byte b) { return b == std::byte{0}; }))
      return fail("no trace header (the writer died before finishing it)");
    return fail("not an ncclwatch trace (bad magic)");
  }
  if (file_size < sizeof(FileHeader)) return fail("truncated inside the file header");
  std::memcpy(&header, map.data, sizeof(FileHeader));
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
  RingIndex ring;
  auto deliver = [&](const RecordView& r) {
    ++stats.records;
    return visit(r);
  };
  if (header.version >= 4) {
    ReadStats first_pass;
    uint64_t ignored = 0;
    scan_records(map, header.header_bytes, first_pass, ignored, [&](const RecordView& r) {
      ring.note(r, path, problems);
      return true;
    });
    ring.find_window(stats);
  }
  bool finished = true;
  if (ring.empty()) {
    finished = scan_records(map, header.header_bytes, stats, corrupt_spans, [&](const RecordView& r) {
      return ring.is_storage(r) || deliver(r);
    });
  } else {
    // The ring's records, in the order written, each before the first other record later than it.
    RingCursor cursor(ring, stats);
    RecordView op{};
    bool have_op = cursor.next(op);
    int64_t history_time = std::numeric_limits<int64_t>::min();
    finished = scan_records(map, header.header_bytes, stats, corrupt_spans, [&](const RecordView& r) {
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

namespace {

namespace fs = std::filesystem;

std::vector<std::string> own_trace_files(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, fs::directory_options::skip_permission_denied, ec))
    if (entry.is_regular_file(ec) && entry.path().extension() == ".nwt") found.push_back(entry.path().string());
  std::sort(found.begin(), found.end());
  return found;
}

// `ncclwatch run`'s job folders directly under `dir`, oldest first (by when they last changed).
std::vector<std::string> job_folders(const std::string& dir) {
  std::vector<std::pair<fs::file_time_type, std::string>> jobs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, fs::directory_options::skip_permission_denied, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("job-", 0) != 0 || !entry.is_directory(ec)) continue;
    jobs.emplace_back(fs::last_write_time(entry.path(), ec), entry.path().string());
  }
  std::sort(jobs.begin(), jobs.end());
  std::vector<std::string> out;
  for (auto& [time, path] : jobs) out.push_back(std::move(path));
  return out;
}

}  // namespace

std::vector<std::string> resolve_job_folders(const std::vector<std::string>& inputs, bool all_jobs,
                                             std::vector<std::string>& notes) {
  std::vector<std::string> out;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (!fs::is_directory(input, ec) || !own_trace_files(input).empty()) {
      out.push_back(input);
      continue;
    }
    std::vector<std::string> jobs = job_folders(input);
    if (jobs.empty()) {
      out.push_back(input);  // expand_inputs names it
    } else if (all_jobs) {
      notes.push_back(fmt::format("reading all {} jobs in {} (--all)", jobs.size(), valid_utf8(input)));
      out.insert(out.end(), jobs.begin(), jobs.end());
    } else {
      if (jobs.size() > 1)
        notes.push_back(fmt::format("reading {}, the newest of {} jobs in {} (name another, or --all for every one)",
                                    valid_utf8(jobs.back()), jobs.size(), valid_utf8(input)));
      else
        notes.push_back(fmt::format("reading {}", valid_utf8(jobs.back())));
      out.push_back(jobs.back());
    }
  }
  return out;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, std::vector<TraceProblem>& problems) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
      std::vector<std::string> found = own_trace_files(input);
      if (found.empty())
        problems.push_back(trace_problem(input, "folder holds no trace files (*.nwt) of its own; subfolders are not "
                                                "searched (name the job folders to read)",
                                         true));
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(input, ec)) {
      files.push_back(input);
    } else {
      problems.push_back(trace_problem(input, "no such file or directory", true));
    }
  }
  return files;
}

}  // namespace ncclwatch::report
