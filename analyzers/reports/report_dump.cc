// dump FILE: every record as one JSON object per line, for scripts, DuckDB and pandas.
#include "reports/commands.h"
#include "reports/input.h"

#include <ncclwatch/trace_strings.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <iterator>

namespace ncclwatch::report {
namespace {

using nlohmann::json;
using namespace trace;

json strings_json(const RecordView& r) {
  json out = json::object();
  const auto* rec = r.as<StringsRecord>();
  if (!rec || sizeof(StringsRecord) + rec->bytes > r.size) return out;
  out["time_ns"] = rec->time_ns;
  std::string blob = record_text(r.data + sizeof(StringsRecord), rec->bytes);
  for_each_string(blob, [&](std::string_view key_view, std::string_view value_view) {
    std::string key(key_view), value(value_view);
    if (out.contains(key) && out[key].is_string()) out[key] = out[key].get<std::string>() + "," + value;
    else out[key] = value;
  });
  return out;
}

// A module record: where the module was loaded, its file and build ID.
void add_module_fields(const RecordView& r, json& j) {
  const auto* m = r.as<ModuleRecord>();
  if (!m || sizeof(ModuleRecord) + m->path_len > r.size) return;
  j["base"] = fmt::format("0x{:x}", m->base);
  j["path"] = record_text(r.data + sizeof(ModuleRecord), m->path_len);
  if (m->build_id_len && sizeof(ModuleRecord) + m->path_len + m->build_id_len <= r.size) {
    std::string hex;
    for (uint32_t i = 0; i < m->build_id_len; ++i)
      hex += fmt::format("{:02x}", static_cast<unsigned>(r.data[sizeof(ModuleRecord) + m->path_len + i]));
    j["build_id"] = hex;
  }
}

// What follows an ApiEvent, where the record holds it: the call site's frames, the name, the
// shim's reading of the site and the Python lines.
void add_call_site_fields(const RecordView& r, const ApiEvent& e, json& j) {
  size_t frames_bytes = size_t{e.nframes} * 8;
  if (sizeof(ApiEvent) + frames_bytes + e.name_len + e.site_len > r.size) return;
  json frames = json::array();
  for (size_t i = 0; i < e.nframes; ++i) {
    uint64_t a;
    std::memcpy(&a, r.data + sizeof(ApiEvent) + i * 8, 8);
    frames.push_back(fmt::format("0x{:x}", a));
  }
  if (!frames.empty()) j["frames"] = frames;
  if (e.name_len) j["name"] = record_text(r.data + sizeof(ApiEvent) + frames_bytes, e.name_len);
  if (CommMemoryFigure m = CommMemoryFigure::of(e); m.known()) j["gpu_memory_from"] = m.from;
  if (e.site_len) j["site"] = record_text(r.data + sizeof(ApiEvent) + frames_bytes + e.name_len, e.site_len);
  size_t python_at = sizeof(ApiEvent) + frames_bytes + e.name_len + e.site_len;
  if (e.python_site_len && python_at + e.python_site_len <= r.size) {
    json python = json::array();
    for (const PythonFrame& f : parse_python_site(record_text(r.data + python_at, e.python_site_len)))
      python.push_back({{"file", f.file}, {"line", f.line}, {"function", f.function}});
    j["python_site"] = python;
  }
}

// A call's begin or end record.
void add_call_fields(const RecordView& r, json& j) {
  const auto* e = r.as<ApiEvent>();
  if (!e) return;
  j["op"] = api_name(static_cast<Api>(e->api));
  j["call_id"] = e->call_id;
  j["time_ns"] = e->time_ns;
  j["tid"] = e->tid;
  if (r.type == RecordType::kCallEnd) j["result"] = e->result;
  j["comm"] = fmt::format("0x{:x}", e->comm);
  j["comm_id"] = hex_id(e->comm_id);
  if (e->parent_id) j["parent_id"] = hex_id(e->parent_id);
  if (e->resource) j["resource"] = fmt::format("0x{:x}", e->resource);
  if (e->bytes) j["bytes"] = e->bytes;
  j["rank"] = e->rank;
  j["nranks"] = e->nranks;
  j["device"] = e->device;
  j["arg0"] = e->arg0;
  j["arg1"] = e->arg1;
  j["flags"] = e->flags;
  j["split_index"] = e->split_index;
  j["library"] = e->library;
  add_call_site_fields(r, *e, j);
}

// The exit's begin or the process's end.
void add_exit_fields(const RecordView& r, json& j) {
  const auto* x = r.as<ExitRecord>();
  if (!x) return;
  j["time_ns"] = x->time_ns;
  static constexpr const char* kReasons[] = {"unknown",    "normal", "signal", "python_finalizing",
                                             "quick_exit", "exec",   "exited"};
  j["reason"] = x->reason < std::size(kReasons) ? kReasons[x->reason] : "unknown";
  j["signal"] = x->signal;
  if (x->reason == static_cast<uint32_t>(trace::ExitReason::kQuickExit) ||
      x->reason == static_cast<uint32_t>(trace::ExitReason::kExited))
    j["status"] = x->signal;
  j["live_comms"] = x->live_comms;
  j["live_resources"] = x->live_resources;
  j["lost_records"] = x->lost_records;
}

// A watched signal as it arrived, and who sent it.
void add_signal_fields(const RecordView& r, json& j) {
  const auto* x = r.as<SignalRecord>();
  if (!x) return;
  j["time_ns"] = x->time_ns;
  j["signal"] = signal_name(x->signal);
  j["code"] = x->code;
  j["sender_pid"] = x->sender_pid;
  j["sender_uid"] = x->sender_uid;
  j["sender_is_parent"] = x->sender_is_parent != 0;
  j["sender_name"] = signal_sender_name(*x);
  j["handled"] = x->handled != 0;
}

void add_memory_fields(const RecordView& r, json& j) {
  const auto* m = r.as<MemoryRecord>();
  if (!m) return;
  j["time_ns"] = m->time_ns;
  j["comm_id"] = m->comm_id;
  j["comm"] = m->comm;
  j["rank"] = m->rank;
  j["op"] = api_name(static_cast<Api>(m->api));
  j["count"] = m->op_count;
  j["peer"] = m->peer;
  j["flags"] = m->flags;
  if (m->flags & kFlagMemoryFromNccl) j["held_bytes"] = m->held_bytes;
  if (m->flags & kFlagMemoryFromFreeChange) j["taken_bytes"] = m->taken_bytes;
}

// What NCCL planned for an op (its profiler interface). Its names come from NCCL, through the trace:
// bounded to their fields.
// The op an OpPlan, OpKernel or OpProxy record belongs to (the same fields in both).
template <class Record> void add_profiled_op_fields(const Record& p, json& j) {
  j["launch_id"] = p.launch_id;
  j["op"] = api_name(static_cast<Api>(p.api));
  j["seq"] = p.seq;
  j["comm_id"] = hex_id(p.comm_id);
  j["count"] = p.count;
  j["datatype"] = p.datatype;
  j["peer"] = p.peer;
  j["rank"] = p.rank;
  j["nranks"] = p.nranks;
}

void add_op_plan_fields(const RecordView& r, json& j) {
  const auto* p = r.as<OpPlanRecord>();
  if (!p) return;
  add_profiled_op_fields(*p, j);
  j["nccl_seq"] = p->nccl_seq;
  j["algo"] = plan_name(p->algo);
  j["proto"] = plan_name(p->proto);
  j["channels"] = p->nchannels;
  j["warps"] = p->nwarps;
  j["graph_captured"] = (p->flags & kPlanGraphCaptured) != 0;
}

// When one channel of an op's kernel ran, by the GPU's timer (NCCL's profiler interface).
void add_op_kernel_fields(const RecordView& r, json& j) {
  const auto* k = r.as<OpKernelRecord>();
  if (!k) return;
  add_profiled_op_fields(*k, j);
  j["channel"] = k->channel;
  j["channels"] = k->nchannels;
  j["gpu_start_ns"] = k->gpu_start_ns;
  j["gpu_stop_ns"] = k->gpu_stop_ns;
}

// What NCCL's proxy moved for an op to or from one peer on a channel (NCCL's profiler interface).
void add_op_proxy_fields(const RecordView& r, json& j) {
  const auto* p = r.as<OpProxyRecord>();
  if (!p) return;
  add_profiled_op_fields(*p, j);
  j["remote"] = p->remote;
  j["send"] = (p->flags & kProxySend) != 0;
  j["channel"] = p->channel;
  j["bytes"] = p->bytes;
  j["start_ns"] = p->start_ns;
  j["stop_ns"] = p->stop_ns;
  j["step_ns"] = p->step_ns;
  j["gpu_wait_ns"] = p->gpu_wait_ns;
  j["peer_wait_ns"] = p->peer_wait_ns;
  j["steps_planned"] = p->steps_planned;
  j["steps_done"] = p->steps_done;
  j["chunk_bytes"] = p->chunk_bytes;
  j["steps_lost"] = (p->flags & kProxyStepsLost) != 0;
  if (p->flags & kProxyMoving) j["moving_ns"] = wrap_add(p->start_ns, int64_t{p->moving_after_us} * 1000);
}

// A collective or point-to-point op.
void add_op_fields(const RecordView& r, json& j) {
  const auto* o = r.as<OpRecord>();
  if (!o) return;
  j["op"] = api_name(static_cast<Api>(o->api));
  j["seq"] = o->seq;
  j["comm_id"] = hex_id(o->comm_id);
  j["comm"] = fmt::format("0x{:x}", o->comm);
  j["count"] = o->count;
  j["datatype"] = o->datatype;
  j["redop"] = o->redop;
  j["peer"] = o->peer;
  j["rank"] = o->rank;
  j["nranks"] = o->nranks;
  j["stream"] = fmt::format("0x{:x}", o->stream);
  j["host_begin_ns"] = o->host_begin_ns;
  j["host_end_ns"] = o->host_end_ns;
  j["launch_id"] = o->launch_id;
  j["group_depth"] = o->group_depth;
  j["flags"] = o->flags;
  j["result"] = o->result;
  j["tid"] = o->tid;
  j["graph"] = o->graph;
}

// A launch's GPU start and end.
void add_gpu_timing_fields(const RecordView& r, json& j) {
  const auto* g = r.as<GpuTimingRecord>();
  if (!g) return;
  j["launch_id"] = g->launch_id;
  j["stream"] = fmt::format("0x{:x}", g->stream);
  j["gpu_begin_ns"] = g->gpu_begin_ns;
  j["gpu_end_ns"] = g->gpu_end_ns;
  j["clock_error_ns"] = g->clock_error_ns;
  j["ops"] = g->ops;
  j["flags"] = g->flags;
}

// A watchdog record: the op pending, and where each of the process's communicators stood.
void add_stall_fields(const RecordView& r, json& j) {
  const auto* st = r.as<StallRecord>();
  if (!st) return;
  j["time_ns"] = st->time_ns;
  j["state"] = st->state == 1 ? "stalled" : "resolved";
  j["op"] = api_name(static_cast<Api>(st->api));
  j["seq"] = st->seq;
  j["comm_id"] = hex_id(st->comm_id);
  j["launch_id"] = st->launch_id;
  j["enqueued_ns"] = st->enqueued_ns;
  json comms = json::array();
  for (uint32_t i = 0; i < st->ncomms && sizeof(StallRecord) + (i + 1) * sizeof(StallComm) <= r.size; ++i) {
    StallComm c;
    std::memcpy(&c, r.data + sizeof(StallRecord) + i * sizeof(StallComm), sizeof(c));
    comms.push_back({{"comm_id", hex_id(c.comm_id)}, {"last_issued_seq", c.last_issued_seq},
                     {"last_completed_seq", c.last_completed_seq}, {"rank", c.rank}, {"nranks", c.nranks}});
  }
  j["comms"] = comms;
}

void add_lost_fields(const RecordView& r, json& j) {
  const auto* l = r.as<LostRecord>();
  if (!l) return;
  j["time_ns"] = l->time_ns;
  j["count"] = l->count;
}

// One line of the dump: the record's type and offset, then its own fields.
json record_json(const RecordView& r) {
  json j;
  j["type"] = record_type_name(r.type);
  j["offset"] = r.offset;
  switch (r.type) {
    case RecordType::kProcess:
    case RecordType::kLibrary:
    case RecordType::kNotice:
    case RecordType::kGraph:
    case RecordType::kStacks:
    case RecordType::kEnding: j.update(strings_json(r)); break;
    case RecordType::kSignal: add_signal_fields(r, j); break;
    case RecordType::kMemory: add_memory_fields(r, j); break;
    case RecordType::kOpPlan: add_op_plan_fields(r, j); break;
    case RecordType::kOpKernel: add_op_kernel_fields(r, j); break;
    case RecordType::kOpProxy: add_op_proxy_fields(r, j); break;
    case RecordType::kModule: add_module_fields(r, j); break;
    case RecordType::kCallBegin:
    case RecordType::kCallEnd: add_call_fields(r, j); break;
    case RecordType::kExitBegin:
    case RecordType::kProcessEnd: add_exit_fields(r, j); break;
    case RecordType::kCollective: add_op_fields(r, j); break;
    case RecordType::kGpuTiming: add_gpu_timing_fields(r, j); break;
    case RecordType::kStall: add_stall_fields(r, j); break;
    case RecordType::kLost: add_lost_fields(r, j); break;
    default: break;
  }
  return j;
}

}  // namespace

int run_dump(const std::string& path, const Options&) {
  std::vector<TraceProblem> problems;
  FileHeader header{};
  ReadStats stats;
  std::string out;
  bool header_done = false;
  auto emit_header = [&] {
    json h = {{"type", "file_header"},
              {"file", valid_utf8(path)},
              {"version", header.version},
              {"min_reader_version", header.min_reader_version},
              {"pid", header.pid},
              {"ppid", header.ppid},
              {"host", std::string(header.host)},
              {"start_wall_ns", header.start_wall_ns},
              {"start_mono_ns", header.start_mono_ns}};
    std::cout << dump_json(h) << "\n";
    header_done = true;
  };
  bool ok = read_trace(
      path,
      [&](const RecordView& r) {
        if (!header_done) emit_header();
        std::cout << dump_json(record_json(r)) << "\n";
      },
      header, stats, problems);
  // A file of a header alone (its process died before recording anything) still shows the header,
  // though it is no usable input.
  bool header_read = std::memcmp(header.magic, kMagic, sizeof(kMagic)) == 0;
  if (!header_done && header_read) emit_header();
  print_problems(problems);
  return ok ? 0 : 2;
}

int run_dump_files(const Options& options) {
  std::vector<TraceProblem> problems;
  std::vector<std::string> files = expand_inputs(options.inputs, problems);
  print_problems(problems);
  int code = files.empty() ? 2 : 0;
  for (const std::string& file : files) code = std::max(code, run_dump(file, options));
  return code;
}

}  // namespace ncclwatch::report
