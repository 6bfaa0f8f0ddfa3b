// columns PATHS: a job's records as binary columns on standard output, for ncclwatch.load (Python
// reads the traces through this tool, never on its own). Each file is read once, in the one pass
// every report makes; the communicators and leaks come from the same pass.
//
// The stream is a sequence of blocks, each one line of JSON and, for a table, its columns' bytes:
//   {"format": "ncclwatch-columns", "version": 1, "totals_bucket_floor_ns": [...]}
//   {"file": F, "process": {host, pid, ppid, start_wall_ns, ...}}            one per usable file
//   {"file": F, "table": T, "rows": N, "columns": [{"name", "dtype"[, "labels"]}, ...]}
//     then each column's N values, one column after the other, little-endian as numpy's dtype
//     says; a column with "labels" holds uint32 codes into them (op names, comm ids: few values)
//   {"file": F, "env": [[key, value], ...]}
//   {"problems": [[file, problem, fatal], ...], "leaks": `leaks --json`}    last
// Tables: ops (group ends left out), totals, calls, stalls. Each op carries its launch's
// GPU times as the reports take them (TimedOps: the begin corrected by the communicator's previous
// launch, the timing of a stream none of its ops named given to all), and how it was timed.
#include "reports/commands.h"
#include "reports/leak_report.h"

#include <ncclwatch/trace_strings.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <span>
#include <unordered_map>

namespace ncclwatch::report {
namespace {

using nlohmann::json;
using namespace trace;

enum class Kind { kU8, kU16, kU32, kU64, kI16, kI32, kI64, kBool, kLabel, kHistogram };

constexpr const char* numpy_dtype(Kind kind) {
  switch (kind) {
    case Kind::kU8: return "u1";
    case Kind::kU16: return "<u2";
    case Kind::kU32: return "<u4";
    case Kind::kU64: return "<u8";
    case Kind::kI16: return "<i2";
    case Kind::kI32: return "<i4";
    case Kind::kI64: return "<i8";
    case Kind::kBool: return "?";
    case Kind::kLabel: return "<u4";
    case Kind::kHistogram: return "(46,)<u4";
  }
  return "";
}

constexpr size_t width(Kind kind) {
  switch (kind) {
    case Kind::kU8:
    case Kind::kBool: return 1;
    case Kind::kU16:
    case Kind::kI16: return 2;
    case Kind::kU32:
    case Kind::kI32:
    case Kind::kLabel: return 4;
    case Kind::kU64:
    case Kind::kI64: return 8;
    case Kind::kHistogram: return 4 * kTotalsBuckets;
  }
  return 0;
}
static_assert(kTotalsBuckets == 46, "numpy_dtype's histogram shape");

// One column of a table, declared once: its name, its kind and how a row gives its value.
template <class Row> struct Column {
  const char* name;
  Kind kind;
  int64_t (*number)(const Row&) = nullptr;          // integer kinds (two's complement bits)
  std::string (*label)(const Row&) = nullptr;        // kLabel
  const uint32_t* (*histogram)(const Row&) = nullptr;  // kHistogram
};

// A table's columns as they fill, row by row.
template <class Row> class ColumnTable {
 public:
  explicit ColumnTable(const std::vector<Column<Row>>& columns) : columns_(columns), data_(columns.size()) {}

  void add(const Row& row) {
    for (size_t i = 0; i < columns_.size(); ++i) {
      const Column<Row>& c = columns_[i];
      std::string& out = data_[i].bytes;
      if (c.kind == Kind::kLabel) {
        uint32_t code = data_[i].code(c.label(row));
        out.append(reinterpret_cast<const char*>(&code), sizeof code);
      } else if (c.kind == Kind::kHistogram) {
        out.append(reinterpret_cast<const char*>(c.histogram(row)), width(c.kind));
      } else {
        int64_t v = c.number(row);
        out.append(reinterpret_cast<const char*>(&v), width(c.kind));  // little-endian: the low bytes
      }
    }
    ++rows_;
  }

  // Row `row`'s values from `first_column` on, again from `value` (what became known of it later).
  void rewrite(uint64_t row, const Row& value, size_t first_column) {
    for (size_t i = first_column; i < columns_.size(); ++i) {
      const Column<Row>& c = columns_[i];
      char* at = data_[i].bytes.data() + row * width(c.kind);
      if (c.kind == Kind::kLabel) {
        uint32_t code = data_[i].code(c.label(value));
        std::memcpy(at, &code, sizeof code);
      } else if (c.kind != Kind::kHistogram) {
        int64_t v = c.number(value);
        std::memcpy(at, &v, width(c.kind));
      }
    }
  }
  uint64_t rows() const { return rows_; }

  void write(std::ostream& out, const std::string& file, const char* table) const {
    json columns = json::array();
    for (size_t i = 0; i < columns_.size(); ++i) {
      json c = {{"name", columns_[i].name}, {"dtype", numpy_dtype(columns_[i].kind)}};
      if (columns_[i].kind == Kind::kLabel) c["labels"] = data_[i].labels;
      columns.push_back(std::move(c));
    }
    out << dump_json({{"file", file}, {"table", table}, {"rows", rows_}, {"columns", columns}}) << "\n";
    for (const Data& d : data_) out.write(d.bytes.data(), static_cast<std::streamsize>(d.bytes.size()));
  }

 private:
  struct Data {
    std::string bytes;
    std::vector<std::string> labels;
    std::unordered_map<std::string, uint32_t> codes;
    uint32_t code(std::string label) {
      auto [it, added] = codes.try_emplace(label, static_cast<uint32_t>(labels.size()));
      if (added) labels.push_back(std::move(label));
      return it->second;
    }
  };
  const std::vector<Column<Row>>& columns_;
  std::vector<Data> data_;
  uint64_t rows_ = 0;
};

// A record of type T from `r`, zero-filled where an older writer's record is shorter.
template <class T> T record_as(const RecordView& r) {
  T out{};
  std::memcpy(&out, r.data, std::min<size_t>(r.size, sizeof(T)));
  return out;
}

std::string api_label(uint16_t api) { return api_name(static_cast<Api>(api)); }

// An op as the ops table has it: the record, and its launch's timing as the reports take it
// (timing as the export names it: gpu, gpu_upper_bound, gpu_end (no start event: the end alone),
// none, not_completed, lost; the times are valid for the kinds that have them).
struct OpRow {
  OpRecord o{};
  const char* timing = "none";
  int64_t gpu_begin_ns = 0, gpu_end_ns = 0;
};

const std::vector<Column<OpRow>> kOpColumns = {
    {"comm_id", Kind::kLabel, nullptr, [](const OpRow& r) { return hex_id(r.o.comm_id); }},
    {"comm", Kind::kU64, [](const OpRow& r) -> int64_t { return r.o.comm; }},
    {"rank", Kind::kI32, [](const OpRow& r) -> int64_t { return r.o.rank; }},
    {"nranks", Kind::kI32, [](const OpRow& r) -> int64_t { return r.o.nranks; }},
    {"seq", Kind::kU64, [](const OpRow& r) -> int64_t { return r.o.seq; }},
    {"op", Kind::kLabel, nullptr, [](const OpRow& r) { return api_label(r.o.api); }},
    {"count", Kind::kU64, [](const OpRow& r) -> int64_t { return r.o.count; }},
    {"datatype", Kind::kLabel, nullptr, [](const OpRow& r) { return std::string(datatype_name(r.o.datatype)); }},
    {"redop", Kind::kLabel, nullptr, [](const OpRow& r) { return std::string(redop_name(r.o.redop)); }},
    {"bytes", Kind::kU64,
     [](const OpRow& r) -> int64_t { return bytes_of(static_cast<Api>(r.o.api), r.o.count, r.o.datatype, r.o.nranks); }},
    {"peer", Kind::kI32, [](const OpRow& r) -> int64_t { return r.o.peer; }},
    {"stream", Kind::kU64, [](const OpRow& r) -> int64_t { return r.o.stream; }},
    {"launch_id", Kind::kU64, [](const OpRow& r) -> int64_t { return r.o.launch_id; }},
    {"host_begin_ns", Kind::kI64, [](const OpRow& r) -> int64_t { return r.o.host_begin_ns; }},
    {"host_end_ns", Kind::kI64, [](const OpRow& r) -> int64_t { return r.o.host_end_ns; }},
    {"group_depth", Kind::kU8, [](const OpRow& r) -> int64_t { return r.o.group_depth; }},
    {"captured", Kind::kBool, [](const OpRow& r) -> int64_t { return (r.o.flags & kOpCaptured) != 0; }},
    {"replayed", Kind::kBool, [](const OpRow& r) -> int64_t { return (r.o.flags & kOpReplayed) != 0; }},
    {"graph", Kind::kU32, [](const OpRow& r) -> int64_t { return r.o.graph; }},
    {"timed", Kind::kBool, [](const OpRow& r) -> int64_t { return (r.o.flags & kOpTimed) != 0; }},
    {"result", Kind::kI16, [](const OpRow& r) -> int64_t { return r.o.result; }},
    {"tid", Kind::kU32, [](const OpRow& r) -> int64_t { return r.o.tid; }},
    // From here on: the launch's timing, written once it is known (kOpTimingColumns).
    {"timing", Kind::kLabel, nullptr, [](const OpRow& r) { return std::string(r.timing); }},
    {"gpu_begin_ns", Kind::kI64, [](const OpRow& r) -> int64_t { return r.gpu_begin_ns; }},
    {"gpu_end_ns", Kind::kI64, [](const OpRow& r) -> int64_t { return r.gpu_end_ns; }},
};
const size_t kOpTimingColumns = kOpColumns.size() - 3;

const std::vector<Column<OpTotalsRow>> kTotalsColumns = {
    {"comm_id", Kind::kLabel, nullptr, [](const OpTotalsRow& t) { return hex_id(t.comm_id); }},
    {"rank", Kind::kI32, [](const OpTotalsRow& t) -> int64_t { return t.rank; }},
    {"nranks", Kind::kI32, [](const OpTotalsRow& t) -> int64_t { return t.nranks; }},
    {"op", Kind::kLabel, nullptr, [](const OpTotalsRow& t) { return api_label(t.api); }},
    {"count", Kind::kU64, [](const OpTotalsRow& t) -> int64_t { return t.count; }},
    {"datatype", Kind::kLabel, nullptr, [](const OpTotalsRow& t) { return std::string(datatype_name(t.datatype)); }},
    {"bytes", Kind::kU64,
     [](const OpTotalsRow& t) -> int64_t { return bytes_of(static_cast<Api>(t.api), t.count, t.datatype, t.nranks); }},
    {"calls", Kind::kU64, [](const OpTotalsRow& t) -> int64_t { return t.calls; }},
    {"host_ns", Kind::kU64, [](const OpTotalsRow& t) -> int64_t { return t.host_ns; }},
    {"gpu_timed", Kind::kU64, [](const OpTotalsRow& t) -> int64_t { return t.gpu_timed; }},
    {"gpu_ns", Kind::kU64, [](const OpTotalsRow& t) -> int64_t { return t.gpu_ns; }},
    {"first_ns", Kind::kI64, [](const OpTotalsRow& t) -> int64_t { return t.first_ns; }},
    {"last_ns", Kind::kI64, [](const OpTotalsRow& t) -> int64_t { return t.last_ns; }},
    {"gpu_histogram", Kind::kHistogram, nullptr, nullptr, [](const OpTotalsRow& t) { return t.gpu_histogram; }},
    {"overflow", Kind::kBool, [](const OpTotalsRow& t) -> int64_t { return t.overflow != 0; }},
};

const std::vector<Column<ApiEvent>> kCallColumns = {
    {"event", Kind::kLabel, nullptr,
     [](const ApiEvent& e) { return std::string(e.h.type == static_cast<uint16_t>(RecordType::kCallEnd) ? "call_end" : "call_begin"); }},
    {"call_id", Kind::kU64, [](const ApiEvent& e) -> int64_t { return e.call_id; }},
    {"api", Kind::kLabel, nullptr, [](const ApiEvent& e) { return api_label(e.api); }},
    {"time_ns", Kind::kI64, [](const ApiEvent& e) -> int64_t { return e.time_ns; }},
    {"comm", Kind::kU64, [](const ApiEvent& e) -> int64_t { return e.comm; }},
    {"comm_id", Kind::kLabel, nullptr, [](const ApiEvent& e) { return hex_id(e.comm_id); }},
    {"parent_id", Kind::kLabel, nullptr, [](const ApiEvent& e) { return hex_id(e.parent_id); }},
    {"rank", Kind::kI32, [](const ApiEvent& e) -> int64_t { return e.rank; }},
    {"nranks", Kind::kI32, [](const ApiEvent& e) -> int64_t { return e.nranks; }},
    {"device", Kind::kI32, [](const ApiEvent& e) -> int64_t { return e.device; }},
    {"result", Kind::kI16, [](const ApiEvent& e) -> int64_t { return e.result; }},
    {"bytes", Kind::kU64, [](const ApiEvent& e) -> int64_t { return e.bytes; }},
    {"resource", Kind::kU64, [](const ApiEvent& e) -> int64_t { return e.resource; }},
    {"tid", Kind::kU32, [](const ApiEvent& e) -> int64_t { return e.tid; }},
};

const std::vector<Column<StallRecord>> kStallColumns = {
    {"time_ns", Kind::kI64, [](const StallRecord& s) -> int64_t { return s.time_ns; }},
    {"state", Kind::kLabel, nullptr, [](const StallRecord& s) { return std::string(s.state == 1 ? "stalled" : s.state == 2 ? "resolved" : "unknown"); }},
    {"op", Kind::kLabel, nullptr, [](const StallRecord& s) { return api_label(s.api); }},
    {"comm_id", Kind::kLabel, nullptr, [](const StallRecord& s) { return hex_id(s.comm_id); }},
    {"seq", Kind::kU64, [](const StallRecord& s) -> int64_t { return s.seq; }},
    {"launch_id", Kind::kU64, [](const StallRecord& s) -> int64_t { return s.launch_id; }},
    {"enqueued_ns", Kind::kI64, [](const StallRecord& s) -> int64_t { return s.enqueued_ns; }},
};

// One file's tables and settings, as its records arrive; the ops' timings as TimedOps pairs them.
struct FileColumns {
  ColumnTable<OpRow> ops{kOpColumns};
  ColumnTable<OpTotalsRow> totals{kTotalsColumns};
  ColumnTable<ApiEvent> calls{kCallColumns};
  ColumnTable<StallRecord> stalls{kStallColumns};
  std::vector<std::pair<std::string, std::string>> env;  // in record order, a key's last value
  std::unordered_map<std::string, size_t> env_at;
  TimedOps<uint64_t, FileColumns> timed{*this};  // each waiting op's row

  void add(const RecordView& r) {
    switch (r.type) {
      case RecordType::kCollective: {
        auto o = record_as<OpRecord>(r);
        auto api = static_cast<Api>(o.api);
        // Collectives and point-to-point ops (and group ends, which time them) go through TimedOps;
        // one-sided ops and records too short to be read as ops are rows of their own, untimed.
        if (r.as<OpRecord>() && (api == Api::kGroupEnd || is_collective(api) || is_point_to_point(api))) timed.add(r);
        else if (api != Api::kGroupEnd) ops.add(OpRow{o});
        break;
      }
      case RecordType::kGpuTiming:
        timed.add(r);
        break;
      case RecordType::kOpTotals: totals.add(record_as<OpTotalsRow>(r)); break;
      case RecordType::kCallBegin:
      case RecordType::kCallEnd: calls.add(record_as<ApiEvent>(r)); break;
      case RecordType::kStall: stalls.add(record_as<StallRecord>(r)); break;
      case RecordType::kProcess: add_settings(r); break;
      default: break;
    }
  }
  void end_of_records() { timed.finish(); }

  // TimedOps' sink ------------------------------------------------------------------------------
  std::optional<uint64_t> on_op(const OpRecord& o, const RecordView&, bool awaits_timing) {
    ops.add(OpRow{o});
    if (!awaits_timing) return std::nullopt;
    return ops.rows() - 1;
  }
  void on_timed(std::span<const uint64_t> rows, const LaunchTiming& t) {
    OpRow timed_row;
    timed_row.timing = !t.gpu_begin ? "gpu_end" : t.begin_upper_bound ? "gpu_upper_bound" : "gpu";
    timed_row.gpu_begin_ns = t.gpu_begin ? t.begin_ns : 0;
    timed_row.gpu_end_ns = t.end_ns;
    for (uint64_t row : rows) ops.rewrite(row, timed_row, kOpTimingColumns);
  }
  void on_no_timing(std::span<const uint64_t> rows, bool promised, NoTiming why) {
    // A promised timing still missing at the end of the trace: the launch never completed.
    OpRow untimed;
    untimed.timing = !promised ? "none" : why == NoTiming::kFileEnded ? "not_completed" : "lost";
    for (uint64_t row : rows) ops.rewrite(row, untimed, kOpTimingColumns);
  }

  void add_settings(const RecordView& r) {
    const auto* rec = r.as<StringsRecord>();
    if (!rec || sizeof(StringsRecord) + rec->bytes > r.size) return;
    for_each_string(record_text(r.data + sizeof(StringsRecord), rec->bytes), [&](std::string_view key, std::string_view value) {
      auto [it, added] = env_at.try_emplace(std::string(key), env.size());
      if (added) env.emplace_back(key, value);
      else env[it->second].second = value;
    });
  }
};

// Hands each file's records to its columns, which outlive the pass: they are written after it, in
// file order.
class ColumnsSink : public JobSink {
 public:
  explicit ColumnsSink(std::vector<std::unique_ptr<FileColumns>>& files) : files_(files) {}
  std::unique_ptr<FileSink> open(size_t file, unsigned, ProcessTrace&) override {
    return std::make_unique<Forward>(*files_[file]);
  }

 private:
  struct Forward : FileSink {
    explicit Forward(FileColumns& columns) : to(columns) {}
    void add(const RecordView& r) override { to.add(r); }
    void end_of_records() override { to.end_of_records(); }
    FileColumns& to;
  };
  std::vector<std::unique_ptr<FileColumns>>& files_;
};

json process_json(const ProcessTrace& p) {
  static constexpr const char* kEndings[] = {"", "normal", "signal", "python_finalizing", "quick_exit", "exec", "exited"};
  const auto& end = p.process_end;
  uint32_t reason = end ? end->reason : 0;
  return {{"host", p.host()},
          {"pid", p.header.pid},
          {"ppid", p.header.ppid},
          {"start_wall_ns", p.header.start_wall_ns},
          {"start_mono_ns", p.header.start_mono_ns},
          {"ended", reason < std::size(kEndings) ? kEndings[reason] : ""},
          {"signal", end ? end->signal : 0},
          {"lost_records", end ? end->lost_records : 0},
          {"ring_slots", p.stats.ring_slots},
          {"ring_written", p.stats.ring_written},
          {"ring_kept", p.stats.ring_kept}};
}

}  // namespace

int run_columns(const Options& options) {
  ReadOptions read;
  read.align_clocks = false;
  std::vector<TraceProblem> input_problems;
  std::vector<std::string> files = expand_inputs(options.inputs, input_problems);
  std::vector<std::unique_ptr<FileColumns>> kept;
  for (size_t i = 0; i < files.size(); ++i) kept.push_back(std::make_unique<FileColumns>());
  ColumnsSink sink(kept);
  JobRead pass = read_job(files, read, {&sink});  // the files expanded already: no problem twice
  pass.problems.insert(pass.problems.begin(), input_problems.begin(), input_problems.end());

  std::ostream& out = std::cout;
  json floors = json::array();  // the totals' histogram buckets: bucket b counts GPU times from floors[b]
  for (int b = 0; b < kTotalsBuckets; ++b) floors.push_back(totals_bucket_floor_ns(b));
  out << dump_json({{"format", "ncclwatch-columns"}, {"version", 1}, {"totals_bucket_floor_ns", floors}}) << "\n";
  for (size_t i = 0; i < pass.processes.size() && i < kept.size(); ++i) {
    if (!pass.usable[i]) continue;
    const ProcessTrace& p = pass.processes[i];
    const std::string& file = p.path;
    out << dump_json({{"file", file}, {"process", process_json(p)}}) << "\n";
    const FileColumns& c = *kept[i];
    c.ops.write(out, file, "ops");
    c.totals.write(out, file, "totals");
    c.calls.write(out, file, "calls");
    c.stalls.write(out, file, "stalls");
    out << dump_json({{"file", file}, {"env", c.env}}) << "\n";
    kept[i].reset();
  }
  json problems = json::array();
  for (const TraceProblem& p : pass.problems) problems.push_back({valid_utf8(p.path), p.what, p.fatal});
  Job job = job_of(std::move(pass));
  json leaks = to_json(leak_report(job, options.symbolize));
  out << dump_json({{"problems", problems}, {"leaks", leaks}}) << "\n";
  out.flush();
  return job.processes.empty() ? kNoUsableInput : 0;
}

}  // namespace ncclwatch::report
