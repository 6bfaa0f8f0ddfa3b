// export -o OUT: the job's traces as Parquet tables for SQL engines (DuckDB, Spark, Trino, ...),
// one folder per table, partitioned Hive-style by job and host:
//   OUT/<table>/job=<job>/host=<host>/<trace>.parquet
// Every table has one file per trace, so a re-export of a trace replaces exactly its rows. The
// schema, its version and what each column means: docs/schema.md (kSchemaVersion below).
//
// Every time is wall-clock ns since the epoch, on one clock for the traces of one export
// (clock_align.h: hosts shifted onto the first host's clock by the collectives they shared).
// Each node may export its own traces (into a shared OUT or its own): its times are then on its
// own host's clock, and its files never collide with another node's (they are named by trace).
//
// Scale: each trace is read by one reader thread that writes its ops file as it reads (a row group
// per 131,072 ops), so memory stays bounded by the row group (and the trace's lifecycle, as every
// report holds it), whatever the trace's size. Files are
// written under a temporary name and renamed into place: a re-export replaces them whole, and the
// same traces give the same bytes.
#include "reports/commands.h"
#include "reports/export_columns.h"
#include "reports/export_peers.h"
#include "reports/input.h"
#include "reports/job_identity.h"
#include "reports/leak_report.h"

#include "parquet/parquet.h"

#include <ncclwatch_version.h>

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <unordered_map>

namespace ncclwatch::report {
namespace {

namespace fs = std::filesystem;
using parquet::ColumnSpec;
using parquet::Kind;
using parquet::TableWriter;
using trace::Api;

// The schema's version, in every file's footer (ncclwatch.schema_version): a column renamed,
// removed or retyped makes the next version; a column added at the end does not.
constexpr const char* kSchemaVersion = "1";

enum OpColumn {
  kOpTrace, kOpPid, kOpComm, kOpRank, kOpNranks, kOpSeq, kOpName, kOpCount, kOpBytes, kOpDatatype, kOpRedop,
  kOpPeer, kOpRoot, kOpStream, kOpTid, kOpLaunch, kOpGrouped, kOpLaunchOps, kOpResult, kOpHostBegin, kOpHostEnd,
  kOpGpuBegin, kOpGpuEnd, kOpTiming, kOpHeld, kOpCaptured, kOpReplayed, kOpGraph, kOpColumns
};
const std::vector<ColumnSpec> kOpsSchema = with_process({
    {"comm_id", Kind::kString}, {"rank", Kind::kInt32}, {"nranks", Kind::kInt32}, {"seq", Kind::kInt64},
    {"op", Kind::kString}, {"count", Kind::kInt64, true}, {"bytes", Kind::kInt64, true}, {"datatype", Kind::kString},
    {"redop", Kind::kString, true}, {"peer", Kind::kInt32, true}, {"root", Kind::kInt32, true},
    {"stream", Kind::kInt64}, {"tid", Kind::kInt32}, {"launch_id", Kind::kInt64}, {"grouped", Kind::kBool},
    {"launch_ops", Kind::kInt32, true}, {"result", Kind::kInt32}, {"host_begin_ns", Kind::kInt64},
    {"host_end_ns", Kind::kInt64}, {"gpu_begin_ns", Kind::kInt64, true}, {"gpu_end_ns", Kind::kInt64, true},
    {"timing", Kind::kString}, {"held_by_previous", Kind::kBool, true}, {"captured", Kind::kBool},
    {"replayed", Kind::kBool}, {"graph", Kind::kInt32, true},
});

const std::vector<ColumnSpec> kProcessesSchema = with_process({
    {"world_rank", Kind::kInt32, true}, {"command", Kind::kString}, {"nccl_version", Kind::kString, true},
    {"start_ns", Kind::kInt64}, {"end_ns", Kind::kInt64}, {"ended", Kind::kString}, {"clock_offset_ns", Kind::kInt64},
    {"records", Kind::kInt64}, {"lost_records", Kind::kInt64}, {"ring_written", Kind::kInt64}, {"ring_kept", Kind::kInt64},
});
const std::vector<ColumnSpec> kCommsSchema = with_process({
    {"world_rank", Kind::kInt32, true}, {"comm_id", Kind::kString}, {"name", Kind::kString, true},
    {"parent_id", Kind::kString, true}, {"rank", Kind::kInt32}, {"nranks", Kind::kInt32}, {"device", Kind::kInt32},
    {"api", Kind::kString}, {"result", Kind::kInt32}, {"state", Kind::kString}, {"leaked", Kind::kBool},
    {"init_begin_ns", Kind::kInt64, true}, {"created_ns", Kind::kInt64, true}, {"finalized_ns", Kind::kInt64, true},
    {"release_api", Kind::kString, true}, {"release_begin_ns", Kind::kInt64, true}, {"release_end_ns", Kind::kInt64, true},
    {"memory_bytes", Kind::kInt64, true}, {"site", Kind::kString, true}, {"python_site", Kind::kString, true},
    {"process_group", Kind::kString, true}, {"torch", Kind::kBool}, {"nvshmem", Kind::kBool},
    // GPU memory (memory_findings.h), as `ncclwatch-report memory` gives it.
    {"held_bytes", Kind::kInt64, true}, {"peak_held_bytes", Kind::kInt64, true}, {"set_up_calls", Kind::kInt32},
    {"memory_from", Kind::kString, true}, {"memory_ambiguous", Kind::kBool}, {"suspended", Kind::kBool},
    {"last_op_ns", Kind::kInt64, true}, {"idle_ms", Kind::kDouble, true},
});
const std::vector<ColumnSpec> kResourcesSchema = with_process({
    {"world_rank", Kind::kInt32, true}, {"api", Kind::kString}, {"comm_id", Kind::kString, true},
    {"rank", Kind::kInt32}, {"bytes", Kind::kInt64, true}, {"created_ns", Kind::kInt64, true},
    {"released", Kind::kBool}, {"released_ns", Kind::kInt64, true}, {"released_with_comm", Kind::kBool},
    {"site", Kind::kString, true},
});
const std::vector<ColumnSpec> kStallsSchema = with_process({
    {"comm_id", Kind::kString}, {"seq", Kind::kInt64}, {"op", Kind::kString}, {"state", Kind::kString},
    {"time_ns", Kind::kInt64}, {"enqueued_ns", Kind::kInt64}, {"pending_ms", Kind::kDouble},
});
const std::vector<ColumnSpec> kEnvironmentSchema = with_process({{"key", Kind::kString}, {"value", Kind::kString}});
const std::vector<ColumnSpec> kNoticesSchema = with_process({{"text", Kind::kString}});

std::unique_ptr<TableWriter> table_writer(const std::string& path, const std::vector<ColumnSpec>& schema) {
  return std::make_unique<TableWriter>(path, schema, std::string("ncclwatch version ") + NCCLWATCH_VERSION,
                                       std::vector<std::pair<std::string, std::string>>{
                                           {"ncclwatch.schema_version", kSchemaVersion}});
}

// A Hive partition value: characters a path or a partition parser would take apart become '_'.
std::string partition_value(std::string_view text) {
  std::string out;
  for (char ch : text) out.push_back(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_' ? ch : '_');
  return out.empty() ? "unknown" : out;
}

std::string stem_of(const std::string& path) { return fs::path(path).stem().string(); }

// A trace's file name (without .nwt) as the name of its tables' files. A file name is any bytes but
// '/' and NUL, and engines take some apart: DuckDB reads a backslash as a folder separator (the
// file's rows vanished from its glob), one byte that is not UTF-8 fails every query over the
// folder, glob characters match other files, a leading '.' hides the file. Every byte but letters,
// digits, '-', '_' and a '.' that does not lead is percent-encoded (%5C), so that distinct names
// stay distinct; the tables' `trace` column keeps the name itself. A name too long for the file
// system once encoded keeps its first 180 bytes and a hash of the whole after "%%" (which no
// encoding makes).
std::string file_name_of(std::string_view stem) {
  std::string out;
  for (size_t i = 0; i < stem.size(); ++i) {
    auto byte = static_cast<unsigned char>(stem[i]);
    if (std::isalnum(byte) || byte == '-' || byte == '_' || (byte == '.' && i > 0)) out += stem[i];
    else out += fmt::format("%{:02X}", byte);
  }
  constexpr size_t kLongest = 200, kKept = 180;  // NAME_MAX is 255: room for ".parquet" and temporary names
  if (out.size() > kLongest) {
    uint64_t hash = 0xcbf29ce484222325;  // FNV-1a: the same name gives the same file on every export
    for (char ch : stem) hash = (hash ^ static_cast<unsigned char>(ch)) * 0x100000001b3;
    size_t cut = kKept;
    while (cut > 0 && (out[cut - 1] == '%' || (cut > 1 && out[cut - 2] == '%'))) --cut;  // never inside a %XX
    out = fmt::format("{}%%{:016x}", out.substr(0, cut), hash);
  }
  return out.empty() ? "unknown" : out;
}

// An op as its row will be written: kept while its launch waits for a GPU timing.
struct OpRow {
  trace::OpRecord o;
  const char* api;
};

// Each (communicator, rank)'s latest op start in one trace (CLOCK_MONOTONIC of the process), as the
// op scanner keeps it (RankComm::last_begin): what the memory findings take idle stretches from.
using LastOps = std::map<std::pair<uint64_t, int32_t>, int64_t>;

// One trace's ops file, filled as the trace is read (TimedOps' sink), and its LastOps.
class OpsFile {
 public:
  // `header`: the trace's, filled in as the reading starts.
  OpsFile(TableWriter& out, std::string trace, const trace::FileHeader& header, int64_t offset, LastOps& last_ops)
      : out_(out), trace_(std::move(trace)), header_(header), offset_(offset), last_ops_(last_ops) {}

  std::optional<OpRow> on_op(const trace::OpRecord& o, const RecordView&, bool awaits_timing) {
    note_last_op(o);
    OpRow row{o, api_name(static_cast<Api>(o.api))};
    if (awaits_timing) return row;
    write(row, "none", nullptr, 0);
    return std::nullopt;
  }
  void on_timed(std::span<const OpRow> ops, const LaunchTiming& t) {
    const char* timing = !t.gpu_begin ? "gpu_end" : t.begin_upper_bound ? "gpu_upper_bound" : "gpu";
    for (const OpRow& row : ops) write(row, timing, &t, t.launch_ops);
  }
  void on_no_timing(std::span<const OpRow> ops, bool promised, NoTiming why) {
    // A promised timing still missing at the end of the trace: the launch never completed.
    const char* timing = !promised ? "none" : why == NoTiming::kFileEnded ? "not_completed" : "lost";
    for (const OpRow& row : ops) write(row, timing, nullptr, 0);
  }
  uint64_t rows = 0;

 private:
  // Flattened: the columns' appends inlined here are most of the export's own time.
  [[gnu::flatten]] void write(const OpRow& row, const char* timing, const LaunchTiming* t, uint32_t launch_ops) {
    const trace::OpRecord& o = row.o;
    auto api = static_cast<Api>(o.api);
    bool p2p = trace::is_point_to_point(api);
    TableWriter& w = out_;
    w[kOpTrace].add(std::string_view(trace_));
    w[kOpPid].add(int64_t{header_.pid});
    w[kOpComm].add(std::string_view(comm_text(o.comm_id)));
    w[kOpRank].add(int64_t{o.rank});
    w[kOpNranks].add(int64_t{o.nranks});
    w[kOpSeq].add(static_cast<int64_t>(o.seq));
    w[kOpName].add(std::string_view(row.api));
    add_unsigned(w[kOpCount], o.count);
    add_unsigned(w[kOpBytes], bytes_of(api, o.count, o.datatype, o.nranks));
    w[kOpDatatype].add(std::string_view(datatype_name(o.datatype)));
    w[kOpRedop].add_optional(o.redop >= 0, std::string_view(o.redop >= 0 ? redop_name(o.redop) : ""));
    w[kOpPeer].add_optional(p2p && o.peer >= 0, int64_t{o.peer});
    w[kOpRoot].add_optional(!p2p && o.peer >= 0, int64_t{o.peer});
    w[kOpStream].add(static_cast<int64_t>(o.stream));
    w[kOpTid].add(int64_t{static_cast<int32_t>(o.tid)});
    w[kOpLaunch].add(static_cast<int64_t>(o.launch_id));
    w[kOpGrouped].add(o.group_depth > 0);
    w[kOpLaunchOps].add_optional(t != nullptr, int64_t{launch_ops});
    w[kOpResult].add(int64_t{o.result});
    w[kOpHostBegin].add(wrap_add(o.host_begin_ns, offset_));
    w[kOpHostEnd].add(wrap_add(o.host_end_ns, offset_));
    w[kOpGpuBegin].add_optional(t && t->gpu_begin, t ? wrap_add(t->begin_ns, offset_) : 0);
    w[kOpGpuEnd].add_optional(t != nullptr, t ? wrap_add(t->end_ns, offset_) : 0);
    w[kOpTiming].add(std::string_view(timing));
    w[kOpHeld].add_optional(t && t->gpu_begin, t && t->began_at_previous_end);
    w[kOpCaptured].add((o.flags & trace::kOpCaptured) != 0);
    w[kOpReplayed].add((o.flags & trace::kOpReplayed) != 0);
    w[kOpGraph].add_optional((o.flags & (trace::kOpCaptured | trace::kOpReplayed)) != 0, int64_t{o.graph});
    w.end_row();
    ++rows;
  }
  void note_last_op(const trace::OpRecord& o) {
    if (!last_op_ || last_key_ != std::pair{o.comm_id, o.rank}) [[unlikely]] {
      last_key_ = {o.comm_id, o.rank};
      last_op_ = &last_ops_[last_key_];  // a map's entries stay where they are
    }
    *last_op_ = o.host_begin_ns;
  }
  // The communicator's id as the reports print it, made once per communicator.
  const std::string& comm_text(uint64_t id) {
    if (id == last_comm_ && !comm_texts_.empty()) return *last_text_;
    auto [it, inserted] = comm_texts_.try_emplace(id);
    if (inserted) it->second = hex_id(id);
    last_comm_ = id;
    last_text_ = &it->second;
    return it->second;
  }

  TableWriter& out_;
  std::string trace_;
  const trace::FileHeader& header_;
  int64_t offset_;
  std::unordered_map<uint64_t, std::string> comm_texts_;
  uint64_t last_comm_ = 0;
  const std::string* last_text_ = nullptr;
  LastOps& last_ops_;
  std::pair<uint64_t, int32_t> last_key_;  // the latest op's (communicator, rank) ...
  int64_t* last_op_ = nullptr;             // ... and its entry
};

// What one trace gave: its process (lifecycle), stalls, proxy operations, last ops and how many ops rows.
struct TraceExport {
  ProcessTrace process;
  std::vector<trace::StallRecord> stalls;
  TracePeers peers;
  LastOps last_ops;
  std::string staged;  // its ops file, before it is moved into its partition
  uint64_t op_rows = 0;
  bool usable = false;
};

// The export's part in the job's pass: each trace's ops written into its staged file as read.
class ExportSink : public JobSink {
 public:
  explicit ExportSink(fs::path staging) : staging_(std::move(staging)) {}
  std::vector<TraceExport> traces;  // per file

  void prepare(const JobRead& job) override { traces.resize(job.files->size()); }
  std::unique_ptr<FileSink> open(size_t file, unsigned, ProcessTrace&) override {
    return std::make_unique<File>(traces[file], (staging_ / fmt::format("{}.parquet", file)).string());
  }

 private:
  class File : public FileSink {
   public:
    File(TraceExport& out, std::string staged) : out_(out), staged_(std::move(staged)) {}
    void start(const Start& s) override {
      ops_ = table_writer(staged_, kOpsSchema);
      sink_.emplace(*ops_, valid_utf8(fs::path(s.process.path).filename().string()), s.process.header,
                    s.clock.offset(s.file), out_.last_ops);
      timed_.emplace(*sink_);
    }
    void add(const RecordView& r) override {
      if (r.type == trace::RecordType::kCollective || r.type == trace::RecordType::kGpuTiming) {
        timed_->add(r);
      } else if (r.type == trace::RecordType::kStall) {
        // As many as the op model keeps: a watchdog writes one per stall and resolution.
        if (const auto* s = r.as<trace::StallRecord>(); s && out_.stalls.size() < kMaxStallsPerProcess)
          out_.stalls.push_back(*s);
      } else if (r.type == trace::RecordType::kOpProxy) {
        out_.peers.add(r);
      }
    }
    void end_of_records() override {
      if (timed_) timed_->finish();
      out_.peers.end_of_records();
    }
    void finish(ProcessTrace& p, bool usable, std::vector<TraceProblem>& problems) override {
      out_.usable = usable;
      out_.process = std::move(p);
      if (!ops_) return;
      out_.op_rows = sink_->rows;
      std::string error;
      if (!ops_->close(error)) {
        problems.push_back(trace_problem(out_.process.path, "its ops were not exported: " + error, false));
        return;
      }
      out_.staged = staged_;
    }

   private:
    TraceExport& out_;
    std::string staged_;
    std::unique_ptr<TableWriter> ops_;
    std::optional<OpsFile> sink_;
    std::optional<TimedOps<OpRow, OpsFile>> timed_;
  };

  fs::path staging_;
};

}  // namespace

namespace {

// Where a table's file for a partition goes (its folders made): OUT/<table>/job=J/host=H/<name>.parquet.
std::string partition_file(const fs::path& out, const char* table, const std::string& job, const std::string& host,
                           const std::string& name) {
  fs::path dir = out / table / ("job=" + job) / ("host=" + host);
  std::error_code ec;
  fs::create_directories(dir, ec);
  return (dir / (name + ".parquet")).string();
}

// The job's communicator ranks with a memory figure (nccl_memory_by_process), by instance.
using CommMemories = std::unordered_map<const CommInstance*, const CommMemory*>;

// The tables other than ops, for one trace.
class TraceTables {
 public:
  TraceTables(const fs::path& out, const std::string& job, const std::string& host, const std::string& name)
      : processes_(table_writer(partition_file(out, "processes", job, host, name), kProcessesSchema)),
        comms_(table_writer(partition_file(out, "comms", job, host, name), kCommsSchema)),
        resources_(table_writer(partition_file(out, "resources", job, host, name), kResourcesSchema)),
        stalls_(table_writer(partition_file(out, "stalls", job, host, name), kStallsSchema)),
        environment_(table_writer(partition_file(out, "environment", job, host, name), kEnvironmentSchema)),
        notices_(table_writer(partition_file(out, "notices", job, host, name), kNoticesSchema)),
        peers_(table_writer(partition_file(out, "peers", job, host, name), kPeersSchema)) {}

  // `p`: the trace's process as the job holds it (`memory` knows its communicators by address).
  void add(const ProcessTrace& p, const TraceExport& t, const CommMemories& memory, const std::string& trace,
           int64_t offset, Symbolizer* symbolizer) {
    trace_ = trace;
    pid_ = p.pid();
    offset_ = offset;
    int32_t rank = world_rank(p);
    add_process(p, rank);
    for (const CommInstance& c : p.comms) add_comm(p, c, rank, t.last_ops, memory, symbolizer);
    for (const ResourceInstance& r : p.resources) add_resource(p, r, rank, symbolizer);
    for (const trace::StallRecord& s : t.stalls) add_stall(s);
    for (const auto& [key, value] : p.strings) {
      TableWriter& w = start(*environment_);
      w[2].add(std::string_view(valid_utf8(key)));
      w[3].add(std::string_view(valid_utf8(value)));
      w.end_row();
    }
    for (const std::string& notice : p.notices) {
      TableWriter& w = start(*notices_);
      w[2].add(std::string_view(valid_utf8(notice)));
      w.end_row();
    }
    t.peers.write(*peers_, trace_, pid_);
  }

  bool close(std::vector<std::string>& errors) {
    bool ok = true;
    for (auto* w : {&processes_, &comms_, &resources_, &stalls_, &environment_, &notices_, &peers_}) {
      std::string error;
      if (!(*w)->close(error)) errors.push_back(error), ok = false;
    }
    return ok;
  }
  uint64_t comm_rows() const { return comms_->rows(); }

 private:
  TableWriter& start(TableWriter& w) {
    w[0].add(std::string_view(trace_));
    w[1].add(int64_t{pid_});
    return w;
  }
  // A time of this process on the export's clock; null when the trace has none (0).
  static void add_time(parquet::ColumnData& column, int64_t mono_ns, int64_t offset) {
    column.add_optional(mono_ns != 0, wrap_add(mono_ns, offset));
  }
  void add_process(const ProcessTrace& p, int32_t rank) {
    TableWriter& w = start(*processes_);
    w[2].add_optional(rank >= 0, int64_t{rank});
    auto cmd = p.strings.find(std::string(trace::process_record::kCmdline));
    w[3].add(std::string_view(cmd == p.strings.end() ? std::string() : valid_utf8(cmd->second)));
    std::string version = p.nccl_version();
    std::string version_text = version.empty() ? "" : nccl_version_text(version);
    w[4].add_optional(!version.empty(), std::string_view(version_text));
    w[5].add(wrap_add(p.header.start_mono_ns, offset_));
    w[6].add(wrap_add(p.process_end ? p.process_end->time_ns : p.last_time_ns, offset_));
    std::string ended = trace_end_text(p);
    w[7].add(std::string_view(ended));
    w[8].add(offset_);
    w[9].add(static_cast<int64_t>(p.stats.records));
    w[10].add(static_cast<int64_t>(p.lost_records));
    w[11].add(static_cast<int64_t>(p.stats.ring_written));
    w[12].add(static_cast<int64_t>(p.stats.ring_kept));
    w.end_row();
  }

  void add_comm(const ProcessTrace& p, const CommInstance& c, int32_t rank, const LastOps& last_ops,
                const CommMemories& memory, Symbolizer* symbolizer) {
    TableWriter& w = start(*comms_);
    w[2].add_optional(rank >= 0, int64_t{rank});
    std::string id = hex_id(c.id), parent = c.parent_id ? hex_id(c.parent_id) : "";
    w[3].add(std::string_view(id));
    std::string name = valid_utf8(c.known_name());
    w[4].add_optional(!name.empty(), std::string_view(name));
    w[5].add_optional(c.parent_id != 0, std::string_view(parent));
    w[6].add(int64_t{c.rank});
    w[7].add(int64_t{c.nranks});
    w[8].add(int64_t{c.device});
    w[9].add(std::string_view(api_name(c.api)));
    w[10].add(int64_t{c.result});
    w[11].add(std::string_view(state_name(c.state)));
    w[12].add(is_leak(c.state));
    add_time(w[13], c.begin_ns, offset_);
    add_time(w[14], c.created_ns, offset_);
    add_time(w[15], c.finalized_ns, offset_);
    bool released = c.release_api != Api::kUnknown;
    w[16].add_optional(released, std::string_view(released ? api_name(c.release_api) : ""));
    add_time(w[17], c.release_begin_ns, offset_);
    add_time(w[18], c.release_end_ns, offset_);
    add_unsigned(w[19], c.memory.bytes, c.memory.known());
    SiteText site = describe_site(symbolizer, p, c.stack, c.site, c.python_site);
    std::string site_text = valid_utf8(site.first);
    w[20].add_optional(!site_text.empty(), std::string_view(site_text));
    std::string python;
    for (size_t i = 0; i < c.python_site.size(); ++i) python += (i ? " < " : "") + valid_utf8(c.python_site[i].describe_short());
    w[21].add_optional(!python.empty(), std::string_view(python));
    std::string group = c.process_group.empty() ? "" : valid_utf8(c.process_group.describe());
    w[22].add_optional(!group.empty(), std::string_view(group));
    w[23].add(c.torch);
    w[24].add(c.nvshmem);
    add_memory(w, c, last_ops, memory);
    w.end_row();
  }
  // The comms table's GPU memory columns (from 25): its figures, its last op, its idle stretch.
  void add_memory(TableWriter& w, const CommInstance& c, const LastOps& last_ops, const CommMemories& memory) {
    CommMemoryFigure held = c.held();
    add_unsigned(w[25], held.bytes, held.known());
    std::vector<HeldPoint> points = c.held_over_time();
    uint64_t peak = 0;
    for (const HeldPoint& point : points) peak = std::max(peak, point.held_bytes);
    add_unsigned(w[26], peak, !points.empty());
    w[27].add(static_cast<int64_t>(std::min<size_t>(c.set_up_calls(), INT32_MAX)));
    w[28].add_optional(held.known(), std::string_view(held.known() ? held.from : ""));
    w[29].add(held.shared_device);
    w[30].add(c.suspended());
    auto last = last_ops.find({c.id, c.rank});
    add_time(w[31], last == last_ops.end() ? 0 : last->second, offset_);
    auto m = memory.find(&c);
    w[32].add_optional(m != memory.end(), m != memory.end() ? m->second->idle_s() * 1e3 : 0.0);
  }

  void add_resource(const ProcessTrace& p, const ResourceInstance& r, int32_t rank, Symbolizer* symbolizer) {
    TableWriter& w = start(*resources_);
    w[2].add_optional(rank >= 0, int64_t{rank});
    w[3].add(std::string_view(api_name(r.api)));
    std::string comm = r.comm_id ? hex_id(r.comm_id) : "";
    w[4].add_optional(r.comm_id != 0, std::string_view(comm));
    w[5].add(int64_t{r.rank});
    add_unsigned(w[6], r.bytes);
    add_time(w[7], r.created_ns, offset_);
    w[8].add(r.released);
    add_time(w[9], r.released ? r.released_ns : 0, offset_);
    w[10].add(r.released_with_comm);
    SiteText site = describe_site(symbolizer, p, r.stack, r.site, r.python_site);
    std::string site_text = valid_utf8(site.first);
    w[11].add_optional(!site_text.empty(), std::string_view(site_text));
    w.end_row();
  }

  void add_stall(const trace::StallRecord& s) {
    TableWriter& w = start(*stalls_);
    std::string id = hex_id(s.comm_id);
    w[2].add(std::string_view(id));
    w[3].add(static_cast<int64_t>(s.seq));
    w[4].add(std::string_view(api_name(static_cast<Api>(s.api))));
    bool stalled = s.state == static_cast<uint32_t>(trace::StallState::kStalled);
    w[5].add(std::string_view(stalled ? "stalled" : "resolved"));
    w[6].add(wrap_add(s.time_ns, offset_));
    w[7].add(wrap_add(s.enqueued_ns, offset_));
    w[8].add(static_cast<double>(wrap_sub(s.time_ns, s.enqueued_ns)) / 1e6);
    w.end_row();
  }

  std::unique_ptr<TableWriter> processes_, comms_, resources_, stalls_, environment_, notices_, peers_;
  std::string trace_;
  int32_t pid_ = 0;
  int64_t offset_ = 0;
};

// The job's name for the partition: as asked, else as its processes' environment named it, else
// the folder of its first trace (a launcher's job-<id>).
std::string job_name(const std::string& asked, const Job& job, const std::vector<std::string>& files) {
  if (!asked.empty()) return partition_value(asked);
  // torchrun's run id is "none" unless given one: it names no job.
  if (std::string id = job_id_in_traces(job); !id.empty() && id != "none") return partition_value(id);
  fs::path folder = fs::absolute(fs::path(files.front())).parent_path();
  return partition_value(folder.filename().string());
}

}  // namespace

int run_export(const Options& options, const std::string& job_asked) {
  if (options.output.empty()) {
    say_in("export", "-o OUT (the folder to write the tables into) is required");
    return 2;
  }
  auto started = std::chrono::steady_clock::now();
  fs::path out = options.output;
  std::error_code ec;
  fs::create_directories(out, ec);
  if (!fs::is_directory(out, ec)) {
    say_in("export", "cannot make the folder {}: {}", options.output, ec ? ec.message() : "a file is in the way");
    return 2;
  }
  // Ops files are staged under OUT until the job's name is known (it is in the traces); named by
  // host and pid, as nodes may export into one shared folder at once.
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  fs::path staging = out / fmt::format(".export-{}-{}", partition_value(host), ::getpid());
  fs::create_directories(staging, ec);
  ExportSink exported(staging);
  ReadOptions read;
  JobRead pass = read_job(options.inputs, read, {&exported});
  const std::vector<std::string>& files = pass.files->paths();
  const ClockModel& clock = pass.clock;
  std::vector<TraceExport>& traces = exported.traces;
  print_problems(pass.problems);
  Job job;
  std::vector<size_t> usable;
  for (size_t i = 0; i < traces.size(); ++i)
    if (traces[i].usable) usable.push_back(i);
  if (usable.empty()) {
    fs::remove_all(staging, ec);
    return explain_nothing_usable();
  }
  // Each communicator rank's memory and idle stretch, as `memory` finds them from the op model's
  // last ops (of a RankComm, the fields they read; idle by what settings is the SQL's to decide).
  std::vector<ProcessOps> ops(usable.size());
  for (size_t k = 0; k < usable.size(); ++k) {
    job.processes.push_back(std::move(traces[usable[k]].process));
    for (const auto& [key, at] : traces[usable[k]].last_ops) {  // clock_offset 0: last_begin is monotonic
      RankComm& rc = ops[k].comms.emplace_back();
      rc.comm_id = key.first, rc.rank = key.second, rc.last_begin = at;
    }
  }
  std::vector<ProcessMemory> memory = nccl_memory_by_process(job, ops);
  CommMemories memory_of;
  for (const ProcessMemory& m : memory)
    for (const CommMemory& c : m.comms) memory_of[c.comm] = &c;
  std::string job_id = job_name(job_asked, job, files);

  // Per trace, in the order given: its ops moved into place, its rows of the other tables written.
  Symbolizer symbolizer;
  Symbolizer* sym = options.symbolize ? &symbolizer : nullptr;
  std::vector<std::string> errors;
  uint64_t op_rows = 0, comm_rows = 0;
  for (size_t k = 0; k < usable.size(); ++k) {
    size_t i = usable[k];
    const TraceExport& t = traces[i];
    const ProcessTrace& p = job.processes[k];
    std::string host = partition_value(p.host()), stem = file_name_of(stem_of(files[i]));
    if (t.staged.empty()) errors.push_back(fmt::format("the ops of {} were not written", files[i]));
    else if (fs::rename(t.staged, partition_file(out, "ops", job_id, host, stem), ec); ec)
      errors.push_back(fmt::format("cannot move the ops of {} into place: {}", files[i], ec.message()));
    op_rows += t.op_rows;
    TraceTables tables(out, job_id, host, stem);
    tables.add(p, t, memory_of, valid_utf8(fs::path(files[i]).filename().string()), clock.offset(i), sym);
    comm_rows += tables.comm_rows();
    tables.close(errors);
  }
  fs::remove_all(staging, ec);
  for (const std::string& e : errors) say_in("export", "{}", e);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("export: %zu trace(s) of job %s, %llu op(s), %llu communicator instance(s), written to %s in %.1f s "
              "(%.1f M ops/s); schema version %s\n",
              usable.size(), job_id.c_str(), static_cast<unsigned long long>(op_rows),
              static_cast<unsigned long long>(comm_rows), options.output.c_str(), seconds,
              static_cast<double>(op_rows) / std::max(seconds, 1e-9) / 1e6, kSchemaVersion);
  return errors.empty() ? 0 : 2;
}

}  // namespace ncclwatch::report
