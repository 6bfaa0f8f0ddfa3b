// timeline -o FILE: Chrome trace-event JSON that ui.perfetto.dev and chrome://tracing open.
// One process per rank, one track per CUDA stream (plus one for host-side NCCL calls), a slice per
// op, communicator creation/destruction, stalls. All processes on one clock (see clock_align.h);
// the method is written into "otherData".
#include "reports.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <mutex>
#include <unordered_map>

namespace ncclwatch::report {
namespace {

using nlohmann::json;
using namespace trace;

constexpr size_t kFlushBytes = 8u << 20;

std::string json_quoted(const std::string& s) { return dump_json(json(s)); }

// Appends complete events to the output file; threads take turns.
class EventSink {
 public:
  explicit EventSink(std::FILE* f) : f_(f) {}
  void write(const std::string& chunk) {
    if (chunk.empty()) return;
    std::lock_guard<std::mutex> lock(mu_);
    std::fwrite(chunk.data(), 1, chunk.size(), f_);
  }

 private:
  std::FILE* f_;
  std::mutex mu_;
};

struct PendingOp {
  uint16_t api;
  uint64_t seq, bytes, count, comm_id, stream;
  uint8_t datatype;
  int32_t peer;
  int64_t host_begin, host_end;
  bool promised;  // flagged as timed (a grouped op only may get its group's timing)
};

class FileTimeline {
 public:
  FileTimeline(size_t pid, int64_t offset, int64_t origin, EventSink& sink, const std::map<uint64_t, std::string>& names)
      : pid_(pid), offset_(offset), origin_(origin), sink_(sink), names_(names) {}

  uint64_t slices = 0;

  void add(const RecordView& r) {
    switch (r.type) {
      case RecordType::kCollective:
        if (const auto* o = r.as<OpRecord>()) on_op(*o);
        break;
      case RecordType::kGpuTiming:
        if (const auto* g = r.as<GpuTimingRecord>()) on_timing(*g);
        break;
      case RecordType::kStall:
        if (const auto* s = r.as<StallRecord>()) {
          bool stalled = s->state == static_cast<uint32_t>(StallState::kStalled);
          event(fmt::format(R"J({{"name":"{} {} seq {}","ph":"i","s":"p","pid":{},"tid":0,"ts":{:.3f},"args":{{"comm":"{}","seq":{},"pending_ms":{:.3f}}}}})J",
                            stalled ? "stall:" : "stall resolved:", api_name(static_cast<Api>(s->api)), s->seq, pid_,
                            us(s->time_ns), hex_id(s->comm_id), s->seq, static_cast<double>(wrap_sub(s->time_ns, s->enqueued_ns)) / 1e6));
        }
        break;
      default: break;
    }
    if (chunk_.size() > kFlushBytes) flush();
  }

  // Ops still waiting for their GPU timing never finished: draw them to the end of the trace.
  void finish(const ProcessTrace& p) {
    int64_t end = p.process_end ? p.process_end->time_ns : p.last_time_ns;
    for (auto& [launch, ops] : pending_)
      for (const PendingOp& op : ops)
        if (op.promised) slice(op, op.host_begin, std::max(end, op.host_end), "never completed");
        else slice(op, op.host_begin, op.host_end, "host");
    for (const CommInstance& c : p.comms) {
      std::string label = c.name.empty() ? hex_id(c.id) : c.name;
      if (c.begin_ns && c.created_ns)
        event(fmt::format(R"J({{"name":"{} {}","ph":"X","pid":{},"tid":0,"ts":{:.3f},"dur":{:.3f},"args":{{"comm":"{}","rank":{},"nranks":{}}}}})J",
                          api_name(c.api), json_text(label), pid_, us(c.begin_ns), static_cast<double>(wrap_sub(c.created_ns, c.begin_ns)) / 1e3,
                          hex_id(c.id), c.rank, c.nranks));
      if (c.release_begin_ns) {
        int64_t release_end = c.release_end_ns ? c.release_end_ns : end;
        event(fmt::format(R"J({{"name":"{} {}","ph":"X","pid":{},"tid":0,"ts":{:.3f},"dur":{:.3f},"args":{{"comm":"{}","state":"{}"}}}})J",
                          api_name(c.release_api), json_text(label), pid_, us(c.release_begin_ns),
                          static_cast<double>(std::max<int64_t>(0, wrap_sub(release_end, c.release_begin_ns))) / 1e3, hex_id(c.id), state_name(c.state)));
      }
    }
    std::string name = fmt::format("rank {} ({} pid {})", world_rank_, p.host(), p.pid());
    event(fmt::format(R"J({{"name":"process_name","ph":"M","pid":{},"args":{{"name":{}}}}})J", pid_, json_quoted(name)));
    event(fmt::format(R"J({{"name":"process_sort_index","ph":"M","pid":{},"args":{{"sort_index":{}}}}})J", pid_,
                      world_rank_ >= 0 ? world_rank_ : 1000000 + static_cast<int64_t>(pid_)));
    event(fmt::format(R"J({{"name":"thread_name","ph":"M","pid":{},"tid":0,"args":{{"name":"NCCL calls, host side"}}}})J", pid_));
    for (const auto& [stream, tid] : tids_)
      event(fmt::format(R"J({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"stream 0x{:x}"}}}})J", pid_, tid,
                        stream));
    flush();
  }

 private:
  static std::string json_text(const std::string& s) {
    std::string q = json_quoted(s);
    return q.substr(1, q.size() - 2);
  }
  double us(int64_t mono) const { return static_cast<double>(wrap_sub(wrap_add(mono, offset_), origin_)) / 1e3; }

  void event(const std::string& text) {
    chunk_ += ",\n";
    chunk_ += text;
  }

  void flush() {
    sink_.write(chunk_);
    chunk_.clear();
  }

  size_t tid(uint64_t stream) {
    auto [it, inserted] = tids_.try_emplace(stream, tids_.size() + 1);
    return it->second;
  }

  void on_op(const OpRecord& o) {
    Api api = static_cast<Api>(o.api);
    if (!is_collective(api) && !is_point_to_point(api)) return;
    if (o.rank >= 0 && o.nranks > world_size_) {
      world_size_ = o.nranks;
      world_rank_ = o.rank;
    }
    PendingOp op{o.api, o.seq, bytes_of(api, o.count, o.datatype, o.nranks), o.count, o.comm_id, o.stream, o.datatype,
                 o.peer, o.host_begin_ns, o.host_end_ns, (o.flags & kOpTimed) != 0};
    bool grouped = o.group_depth > 0;
    if (((o.flags & kOpTimed) || grouped) && !(o.flags & kOpCaptured)) {
      pending_[o.launch_id].push_back(op);
      return;
    }
    slice(op, o.host_begin_ns, o.host_end_ns, "host");
  }

  void on_timing(const GpuTimingRecord& g) {
    auto it = pending_.find(g.launch_id);
    if (it == pending_.end()) return;
    bool has_begin = g.flags & kTimingHasBegin;
    for (const PendingOp& op : it->second)
      slice(op, has_begin ? g.gpu_begin_ns : op.host_begin, g.gpu_end_ns, has_begin ? "gpu" : "host_to_gpu_end");
    pending_.erase(it);
  }

  void slice(const PendingOp& op, int64_t begin, int64_t end, const char* timing) {
    auto name = names_.find(op.comm_id);
    std::string comm = name == names_.end() ? hex_id(op.comm_id) : json_text(name->second);
    ++slices;
    event(fmt::format(
        R"J({{"name":"{}","cat":"nccl","ph":"X","pid":{},"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"seq":{},"bytes":{},"comm":"{}","comm_id":"{}","count":{},"datatype":"{}","peer":{},"timing":"{}"}}}})J",
        api_name(static_cast<Api>(op.api)), pid_, tid(op.stream), us(begin), static_cast<double>(std::max<int64_t>(0, wrap_sub(end, begin))) / 1e3, op.seq,
        op.bytes, comm, hex_id(op.comm_id), op.count, datatype_name(op.datatype), op.peer, timing));
  }

  size_t pid_;
  int64_t offset_, origin_;
  EventSink& sink_;
  const std::map<uint64_t, std::string>& names_;
  std::string chunk_;
  std::map<uint64_t, size_t> tids_;
  std::unordered_map<uint64_t, std::vector<PendingOp>> pending_;
  int32_t world_size_ = 0;
  int64_t world_rank_ = -1;
};

}  // namespace

int run_timeline(const Options& options) {
  if (options.output.empty()) {
    std::fprintf(stderr, "ncclwatch-report timeline: -o FILE is required\n");
    return 2;
  }
  std::vector<TraceProblem> problems;
  std::vector<std::string> files = expand_inputs(options.inputs, problems);
  unsigned threads = reader_threads(files.size());
  ClockModel clock = align_clocks(files, threads);
  // Communicator names come from the lifecycle records; a first light pass gets them.
  Job names_job = load_job(files);
  std::map<uint64_t, std::string> names = comm_names(names_job);
  int64_t origin = 0;
  for (size_t i = 0; i < files.size(); ++i)
    if (clock.known[i] && clock.start_ns[i] && (!origin || clock.start_ns[i] < origin)) origin = clock.start_ns[i];

  std::FILE* f = std::fopen(options.output.c_str(), "w");
  if (!f) {
    std::fprintf(stderr, "ncclwatch-report: cannot write %s\n", options.output.c_str());
    return 2;
  }
  std::fputs("{\"traceEvents\":[\n{\"name\":\"ncclwatch\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"ncclwatch\"}}", f);
  EventSink sink(f);
  std::vector<std::vector<TraceProblem>> file_problems(files.size());
  std::vector<char> usable(files.size(), 0);
  std::vector<uint64_t> slices(files.size(), 0);
  parallel_for(files.size(), threads, [&](size_t i, unsigned) {
    ProcessTrace p;
    p.path = valid_utf8(files[i]);
    LifecycleFolder lifecycle(p);
    int64_t offset = clock.known[i] ? clock.offset_ns[i] : 0;
    FileTimeline timeline(i + 1, offset, origin, sink, names);
    usable[i] = read_trace(
        files[i],
        [&](const RecordView& r) {
          lifecycle.add(r);
          timeline.add(r);
        },
        p.header, p.stats, file_problems[i]);
    if (!usable[i]) return;
    lifecycle.finish(file_problems[i]);
    timeline.finish(p);
    slices[i] = timeline.slices;
  });
  for (auto& list : file_problems) problems.insert(problems.end(), list.begin(), list.end());
  print_problems(problems);
  size_t used = static_cast<size_t>(std::count(usable.begin(), usable.end(), 1));
  uint64_t total_slices = 0;
  for (uint64_t s : slices) total_slices += s;
  json other = {{"clock_alignment", clock.method}, {"hosts", clock.hosts}, {"origin_wall_ns", origin},
                {"traces", used}, {"op_slices", total_slices},
                {"tracks", "one process per rank, one thread per CUDA stream (tid 0: host-side NCCL calls)"}};
  std::fprintf(f, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":%s}\n", dump_json(other).c_str());
  bool ok = std::fclose(f) == 0;
  if (!ok) {
    std::fprintf(stderr, "ncclwatch-report: writing %s failed\n", options.output.c_str());
    return 2;
  }
  if (!used) {
    std::fprintf(stderr, "ncclwatch-report: no usable trace files\n");
    return 2;
  }
  std::printf("timeline: %zu trace(s), %llu op slice(s) written to %s (open it in ui.perfetto.dev)\n", used,
              static_cast<unsigned long long>(total_slices), options.output.c_str());
  return 0;
}

}  // namespace ncclwatch::report
