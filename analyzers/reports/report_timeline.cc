// timeline -o FILE: Chrome trace-event JSON that ui.perfetto.dev and chrome://tracing open
// (gzip-compressed when FILE ends in .gz, which Perfetto opens as it is).
//
// One process per rank. Its tracks: per application thread, the NCCL calls as the host enqueued
// them (ops without GPU timing, communicator creation and release); per CUDA stream, the GPU
// execution of GPU-timed launches. Slices of one track never overlap: a stream runs its launches
// in order, so a GPU slice that starts before the previous one ended (clock error) starts at its
// end. Flow arrows link one collective (comm, seq) from rank to rank where it was GPU-timed. All
// processes on one clock (clock_align.h); the method is written into "otherData".
//
// Scale: each file is read and written by one reader thread, its events formatted into a buffer
// that is compressed by that thread (an independent piece of one deflate stream, as pigz does)
// and appended under a lock; memory is bounded by that buffer and by the launches a file may
// hold waiting for their timing (kMaxWaitingLaunches; beyond, the oldest is drawn without it).
#include "reports/commands.h"
#include "reports/input.h"
#include "reports/timeline_output.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <mutex>
#include <optional>
#include <span>
#include <unordered_map>

namespace ncclwatch::report {
namespace {

using nlohmann::json;
using namespace trace;

constexpr size_t kFlushBytes = 8u << 20;

std::string json_quoted(const std::string& s) { return dump_json(json(s)); }
std::string json_text(const std::string& s) {
  std::string q = json_quoted(s);
  return q.substr(1, q.size() - 2);
}

// What the user asked to see.
struct TimelineFilter {
  std::vector<int32_t> ranks;  // sorted; empty: every rank
  std::string comm;            // as given: a name or an id; empty: every communicator
  std::string comm_id;         // the same read as an id, 16 hex digits (empty: not hex)
  int64_t from_ns = std::numeric_limits<int64_t>::min();  // relative to the timeline's origin
  int64_t to_ns = std::numeric_limits<int64_t>::max();
  bool flows = true;

  bool wants_rank(int32_t rank) const { return ranks.empty() || std::binary_search(ranks.begin(), ranks.end(), rank); }
  bool wants_time(int64_t begin, int64_t end) const { return end >= from_ns && begin <= to_ns; }
};

// "0-3,8,10-11" -> sorted ranks; false on anything else.
bool parse_rank_list(const std::string& text, std::vector<int32_t>& out) {
  size_t i = 0;
  auto number = [&](int32_t& n) {
    size_t start = i;
    int64_t v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9' && v <= (1 << 24)) v = v * 10 + (text[i++] - '0');
    n = static_cast<int32_t>(v);
    return i > start && v <= (1 << 24);
  };
  while (i < text.size()) {
    int32_t first = 0, last = 0;
    if (!number(first)) return false;
    last = first;
    if (i < text.size() && text[i] == '-') {
      ++i;
      if (!number(last) || last < first || last - first > (1 << 20)) return false;
    }
    for (int32_t r = first; r <= last; ++r) out.push_back(r);
    if (i < text.size() && text[i++] != ',') return false;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return !out.empty();
}

// Microseconds with three decimals, written from integers (no floating-point formatting).
struct Micros {
  int64_t ns;
};

}  // namespace
}  // namespace ncclwatch::report

template <> struct fmt::formatter<ncclwatch::report::Micros> {
  constexpr auto parse(format_parse_context& ctx) { return ctx.begin(); }
  template <class Context> auto format(ncclwatch::report::Micros m, Context& ctx) const {
    uint64_t magnitude = m.ns < 0 ? 0 - static_cast<uint64_t>(m.ns) : static_cast<uint64_t>(m.ns);
    char text[32];
    char* end = text + sizeof text;
    char* p = end;
    uint64_t fraction = magnitude % 1000, whole = magnitude / 1000;
    for (int i = 0; i < 3; ++i, fraction /= 10) *--p = static_cast<char>('0' + fraction % 10);
    *--p = '.';
    do *--p = static_cast<char>('0' + whole % 10); while (whole /= 10);
    if (m.ns < 0) *--p = '-';
    return std::copy(p, end, ctx.out());
  }
};

namespace ncclwatch::report {
namespace {

struct PendingOp {
  uint16_t api;
  uint64_t seq, bytes, comm_id, stream;
  uint32_t tid;
  int32_t peer, rank, nranks;
  int64_t host_begin, host_end;
  uint32_t graph = 0;  // run by a launch of this CUDA graph (trace::kOpReplayed), else 0
};

// Tracks (Chrome "threads") of one rank, told apart by the top bits of their key: host threads,
// communicators (creation and release: PyTorch releases several at once from different threads)
// and CUDA streams.
constexpr uint64_t kHostTrack = uint64_t{1} << 63;
constexpr uint64_t kCommTrack = uint64_t{1} << 62;
constexpr uint64_t kTrackKind = kHostTrack | kCommTrack;

class FileTimeline {
 public:
  FileTimeline(size_t pid, int64_t offset, int64_t origin, const TimelineFilter& filter, TimelineOutput& out,
               unsigned thread, const ProcessTrace& process)
      : pid_(pid), offset_(offset), origin_(origin), filter_(filter), out_(out), thread_(thread), process_(process) {}

  uint64_t slices = 0;
  bool skipped = false;  // not a rank the filter wants

  void add(const RecordView& r) {
    if (skipped) return;
    switch (r.type) {
      case RecordType::kCollective:
        if (!r.as<OpRecord>()) break;
        if (world_rank_ < 0) {
          decide_rank();
          if (skipped) return;
        }
        timed_ops_.add(r);
        break;
      case RecordType::kGpuTiming:
        timed_ops_.add(r);
        break;
      case RecordType::kStall:
        if (const auto* s = r.as<StallRecord>(); s && wants_comm(s->comm_id) && wants(s->time_ns, s->time_ns)) {
          bool stalled = s->state == static_cast<uint32_t>(StallState::kStalled);
          event(R"J({{"name":"{} {} seq {}","ph":"i","s":"p","pid":{},"tid":0,"ts":{},"args":{{"comm":"{}","seq":{},"pending_ms":{:.3f}}}}})J",
                stalled ? "stall:" : "stall resolved:", api_name(static_cast<Api>(s->api)), s->seq, pid_, us(s->time_ns),
                hex_id(s->comm_id), s->seq, static_cast<double>(wrap_sub(s->time_ns, s->enqueued_ns)) / 1e6);
        }
        break;
      default: break;
    }
  }

  // Ops still waiting for their GPU timing never finished: drawn on their stream to the end.
  void finish(const ProcessTrace& p) {
    if (!skipped && world_rank_ < 0) decide_rank();
    if (skipped) return;
    int64_t end = p.process_end ? p.process_end->time_ns : p.last_time_ns;
    file_end_ = end;
    timed_ops_.finish();
    for (size_t k = 0; k < p.comms.size(); ++k) {
      const CommInstance& c = p.comms[k];
      if (!wants_comm(c.id)) continue;
      std::string label = json_text(c.known_name().empty() ? hex_id(c.id) : c.known_name());
      size_t tid = 0;
      auto comm_track = [&] {
        if (!tid) tid = track(kCommTrack | k, label).tid;
        return tid;
      };
      if (c.state == CommState::kInitHung && c.begin_ns && wants(c.begin_ns, end))
        event(R"J({{"name":"{} {} (never returned)","ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"comm":"{}","rank":{},"nranks":{},"state":"init_hung"}}}})J",
              api_name(c.api), label, pid_, comm_track(), us(c.begin_ns), dur(c.begin_ns, end), hex_id(c.id), c.rank, c.nranks);
      if (c.begin_ns && c.created_ns && wants(c.begin_ns, c.created_ns))
        event(R"J({{"name":"{} {}","ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"comm":"{}","rank":{},"nranks":{}{}}}}})J",
              api_name(c.api), label, pid_, comm_track(), us(c.begin_ns), dur(c.begin_ns, c.created_ns), hex_id(c.id), c.rank,
              c.nranks,
              (c.python_site.empty() ? "" : R"(,"created_at":")" + json_text(c.python_site.front().describe_short()) + '"') +
                  (c.process_group.empty() ? "" : R"(,"process_group":")" + json_text(c.process_group.describe()) + '"'));
      if (c.release_begin_ns) {
        int64_t release_end = c.release_end_ns ? c.release_end_ns : end;
        if (wants(c.release_begin_ns, release_end))
          event(R"J({{"name":"{} {}","ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"comm":"{}","state":"{}"}}}})J",
                api_name(c.release_api), label, pid_, comm_track(), us(c.release_begin_ns), dur(c.release_begin_ns, release_end),
                hex_id(c.id), state_name(c.state));
      }
    }
    std::string name = fmt::format("rank {} ({} pid {})", world_rank_, p.host(), p.pid());
    event(R"J({{"name":"process_name","ph":"M","pid":{},"args":{{"name":{}}}}})J", pid_, json_quoted(name));
    event(R"J({{"name":"process_sort_index","ph":"M","pid":{},"args":{{"sort_index":{}}}}})J", pid_,
          world_rank_ >= 0 ? world_rank_ : 1000000 + static_cast<int64_t>(pid_));
    event(R"J({{"name":"thread_name","ph":"M","pid":{},"tid":0,"args":{{"name":"stalls"}}}})J", pid_);
    for (const auto& [key, track] : tracks_) {
      if (key & kHostTrack)
        event(R"J({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"thread {}: NCCL calls (host enqueue)"}}}})J",
              pid_, track.tid, key & ~kTrackKind);
      else if (key & kCommTrack)
        event(R"J({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"communicator {}: creation, release"}}}})J",
              pid_, track.tid, track.label);
      else
        event(R"J({{"name":"thread_name","ph":"M","pid":{},"tid":{},"args":{{"name":"stream 0x{:x}: GPU execution"}}}})J",
              pid_, track.tid, key);
      // Threads first, then streams, then communicators.
      int64_t group = key & kHostTrack ? 0 : key & kCommTrack ? 200000 : 100000;
      event(R"J({{"name":"thread_sort_index","ph":"M","pid":{},"tid":{},"args":{{"sort_index":{}}}}})J", pid_, track.tid,
            group + static_cast<int64_t>(track.tid));
    }
    flush();
  }

 private:
  struct Track {
    size_t tid = 0;
    std::string label;  // communicator tracks: the communicator's name (JSON-escaped) or id
    int64_t last_end = std::numeric_limits<int64_t>::min();  // aligned ns
  };

  template <class... Args> void event(fmt::format_string<Args...> format, Args&&... args) {
    chunk_ += ",\n";
    fmt::format_to(std::back_inserter(chunk_), format, std::forward<Args>(args)...);
    if (chunk_.size() > kFlushBytes) flush();
  }
  void flush() {
    out_.write(chunk_, thread_);
    chunk_.clear();
  }

  int64_t relative(int64_t mono) const { return wrap_sub(wrap_add(mono, offset_), origin_); }
  Micros us(int64_t mono) const { return {relative(mono)}; }
  static Micros dur(int64_t begin, int64_t end) { return {std::max<int64_t>(0, wrap_sub(end, begin))}; }
  bool wants(int64_t begin_mono, int64_t end_mono) const { return filter_.wants_time(relative(begin_mono), relative(end_mono)); }

  bool wants_comm(uint64_t comm_id) {
    if (filter_.comm.empty()) return true;
    auto [it, inserted] = comm_wanted_.try_emplace(comm_id, false);
    if (inserted) it->second = filter_.comm_id == hex_id(comm_id) || filter_.comm == comm_name(comm_id);
    return it->second;
  }
  const std::string& comm_name(uint64_t comm_id) {
    auto [it, inserted] = names_.try_emplace(comm_id);
    if (inserted)
      for (const CommInstance& c : process_.comms)
        if (c.id == comm_id && !c.known_name().empty()) it->second = c.known_name();
    return it->second;
  }

  // The rank people know a process by: its rank in the largest communicator it created so far
  // (creation records come before the communicator's ops).
  void decide_rank() {
    int32_t widest = 0;
    for (const CommInstance& c : process_.comms)
      if (c.nranks > widest && c.rank >= 0) widest = c.nranks, world_rank_ = c.rank;
    skipped = !filter_.ranks.empty() && (world_rank_ < 0 || !filter_.wants_rank(static_cast<int32_t>(world_rank_)));
  }

  Track& track(uint64_t key, const std::string& label = {}) {
    auto [it, inserted] = tracks_.try_emplace(key);
    if (inserted) {
      it->second.tid = tracks_.size();
      it->second.label = label;
    }
    return it->second;
  }

 public:
  // TimedOps' sink (public: TimedOps calls it) ----------------------------------------------

  std::optional<PendingOp> on_op(const OpRecord& o, const RecordView&, bool awaits_timing) {
    if (!wants_comm(o.comm_id)) return std::nullopt;
    PendingOp op{o.api, o.seq, bytes_of(static_cast<Api>(o.api), o.count, o.datatype, o.nranks), o.comm_id, o.stream, o.tid,
                 o.peer, o.rank, o.nranks, o.host_begin_ns, o.host_end_ns, o.flags & kOpReplayed ? o.graph : 0};
    if (awaits_timing) return op;
    host_slice(op);
    return std::nullopt;
  }

  void on_timed(std::span<const PendingOp> ops, const LaunchTiming& t) {
    launch_slice(ops, t.gpu_begin ? t.begin_ns : ops.front().host_begin, t.end_ns, t.gpu_begin ? "gpu" : "host_to_gpu_end");
  }

  void on_no_timing(std::span<const PendingOp> ops, bool promised, NoTiming why) {
    // Nothing promised a timing (an untimed group): as enqueued.
    if (!promised) {
      for (const PendingOp& op : ops) host_slice(op);
      return;
    }
    const PendingOp& first = ops.front();
    if (why == NoTiming::kGivenUp) {  // before the end of the file: how long it ran is unknown
      launch_slice(ops, first.host_begin, first.host_end, "timing not found");
      return;
    }
    // Still waiting at the end of the file, in launch order: on each stream the first launch left
    // is the one that never completed; the ones queued behind it never started.
    bool& stuck = stream_stuck_[first.stream];
    launch_slice(ops, first.host_begin, std::max(file_end_, first.host_end), stuck ? "never started" : "never completed");
    stuck = true;
  }

 private:
  // An op the host enqueued, on its thread's track.
  void host_slice(const PendingOp& op) {
    if (!wants(op.host_begin, op.host_end)) return;
    Track& t = track(kHostTrack | op.tid);  // the thread id is 32 bits: it never reaches the kind bits
    ++slices;
    event(R"J({{"ph":"X","name":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"seq":{},"bytes":{},"comm":"{}"{}}}}})J",
          api_name(static_cast<Api>(op.api)), pid_, t.tid, us(op.host_begin), dur(op.host_begin, op.host_end), op.seq, op.bytes,
          comm_label(op.comm_id), peer_arg(op));
  }

  // One launch on its stream: one op, or the ops of one group (drawn as one slice, named by them).
  void launch_slice(std::span<const PendingOp> ops, int64_t begin, int64_t end, const char* timing) {
    const PendingOp& first = ops.front();
    if (!wants(begin, end)) return;
    Track& t = track(first.stream & ~kTrackKind);
    int64_t aligned_begin = wrap_add(begin, offset_), aligned_end = wrap_add(end, offset_);
    // The stream ran the previous launch first: a start before its end is clock error.
    if (aligned_begin < t.last_end) {
      begin = wrap_sub(t.last_end, offset_);
      aligned_begin = t.last_end;
    }
    if (aligned_end < aligned_begin) end = begin, aligned_end = aligned_begin;
    t.last_end = aligned_end;
    ++slices;
    std::string name = api_name(static_cast<Api>(first.api));
    if (ops.size() > 1) {
      std::vector<uint16_t> apis;  // the distinct ops of the group, in order
      for (const PendingOp& op : ops)
        if (std::find(apis.begin(), apis.end(), op.api) == apis.end()) apis.push_back(op.api);
      name = fmt::format("group of {}: ", ops.size());
      for (size_t k = 0; k < apis.size(); ++k) name += (k ? ", " : "") + std::string(api_name(static_cast<Api>(apis[k])));
    }
    if (first.graph) name = fmt::format("CUDA graph {} replay: {}", first.graph, name);
    uint64_t bytes = 0;
    for (const PendingOp& op : ops) bytes += op.bytes;
    // GPU execution is what a stream track shows; other timings are named.
    event(R"J({{"ph":"X","name":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"seq":{},"bytes":{},"comm":"{}"{}{}{}{}}}}})J",
          name, pid_, t.tid, us(begin), dur(begin, end), first.seq, bytes, comm_label(first.comm_id), peer_arg(first),
          ops.size() > 1 ? fmt::format(",\"ops\":{}", ops.size()) : std::string(),
          timing == std::string_view("gpu") ? "" : ",\"timing\":\"", timing == std::string_view("gpu") ? "" : std::string(timing) + "\"");
    if (!filter_.flows || first.seq == 0 || first.rank < 0 || is_point_to_point(static_cast<Api>(first.api))) return;
    // Rank r's launch of (comm, seq) is linked to rank r+1's: one arrow per neighbouring pair.
    // Flow events pair up by (cat, name, id): the communicator's whole id is the category, the
    // name holds the seq, and the id (below 2^53, which any JSON reader keeps exact) is 40 bits
    // of seq and 13 of the link. Neighbouring seqs get neighbouring ids, which compress well.
    auto id = [&](int64_t link) { return ((first.seq & 0xffffffffffull) << 13) | (static_cast<uint64_t>(link) & 0x1fff); };
    if (first.rank > 0)
      event(R"J({{"ph":"f","bp":"e","name":"seq {}","cat":"{:016x}","id":{},"pid":{},"tid":{},"ts":{}}})J", first.seq,
            first.comm_id, id(first.rank - 1), pid_, t.tid, us(begin));
    if (first.rank + 1 < first.nranks)
      event(R"J({{"ph":"s","name":"seq {}","cat":"{:016x}","id":{},"pid":{},"tid":{},"ts":{}}})J", first.seq,
            first.comm_id, id(first.rank), pid_, t.tid, us(begin));
  }

  // The communicator as slices name it: its name (JSON-escaped) or id; computed once per comm.
  const std::string& comm_label(uint64_t comm_id) {
    auto [it, inserted] = labels_.try_emplace(comm_id);
    if (inserted) {
      const std::string& name = comm_name(comm_id);
      it->second = name.empty() ? hex_id(comm_id) : json_text(name);
    }
    return it->second;
  }
  static std::string peer_arg(const PendingOp& op) { return op.peer >= 0 ? fmt::format(",\"peer\":{}", op.peer) : std::string(); }

  size_t pid_;
  int64_t offset_, origin_;
  const TimelineFilter& filter_;
  TimelineOutput& out_;
  unsigned thread_;
  const ProcessTrace& process_;
  std::string chunk_;
  std::unordered_map<uint64_t, Track> tracks_;
  TimedOps<PendingOp, FileTimeline> timed_ops_{*this};
  int64_t file_end_ = 0;                            // for the launches still waiting at the end
  std::unordered_map<uint64_t, bool> stream_stuck_;  // a stream's earlier launch never completed
  std::unordered_map<uint64_t, std::string> names_;
  std::unordered_map<uint64_t, std::string> labels_;
  std::unordered_map<uint64_t, bool> comm_wanted_;
  int64_t world_rank_ = -1;
};

// Reads the user's filter options; a message on stderr and nullopt when one is malformed.
std::optional<TimelineFilter> filter_of(const Options& options) {
  TimelineFilter f;
  if (!options.timeline_ranks.empty() && !parse_rank_list(options.timeline_ranks, f.ranks)) {
    say_in("timeline", "--ranks {} is not a rank list such as 0-3,8", options.timeline_ranks);
    return std::nullopt;
  }
  // A name, or an id: 16 hex digits as the reports print it, or fewer (with or without 0x) as
  // the dump's handles print it; a name that looks like hex still matches as a name.
  f.comm = options.timeline_comm;
  std::string digits = f.comm.starts_with("0x") ? f.comm.substr(2) : f.comm;
  if (!digits.empty() && digits.size() <= 16 && digits.find_first_not_of("0123456789abcdef") == std::string::npos)
    f.comm_id = std::string(16 - digits.size(), '0') + digits;
  // Seconds from the origin; beyond ±100 years the nanoseconds would not fit.
  auto seconds = [](const char* option, double s, int64_t& ns) {
    if (!std::isfinite(s) || std::fabs(s) > 3e9) {
      say_in("timeline", "{} {:g} is not a time in seconds from the job's start", option, s);
      return false;
    }
    ns = static_cast<int64_t>(s * 1e9);
    return true;
  };
  if (options.timeline_from_s && !seconds("--from", *options.timeline_from_s, f.from_ns)) return std::nullopt;
  if (options.timeline_to_s && !seconds("--to", *options.timeline_to_s, f.to_ns)) return std::nullopt;
  if (f.to_ns < f.from_ns) {
    say_in("timeline", "--to is before --from");
    return std::nullopt;
  }
  f.flows = !options.timeline_no_flows;
  return f;
}

// The timeline's part in the job's pass: each trace's events written as it is read, one thread's
// output at a time.
class TimelineSink : public JobSink {
 public:
  TimelineSink(std::FILE* f, bool gzip, const TimelineFilter& filter, std::chrono::steady_clock::time_point started)
      : file_(f), gzip_(gzip), filter_(filter), started_(started), last_progress_(started) {}

  std::optional<TimelineOutput> out;
  int64_t origin = 0;
  std::vector<char> shown;
  std::vector<uint64_t> slices;
  std::vector<uint64_t> overwritten;  // ring records each trace lost to newer ones

  void prepare(const JobRead& job) override {
    size_t n = job.files->size();
    files_ = n;
    for (size_t i = 0; i < n; ++i)
      if (job.clock.known[i] && job.clock.start_ns[i] && (!origin || job.clock.start_ns[i] < origin)) origin = job.clock.start_ns[i];
    out.emplace(file_, gzip_, std::max(1u, job.threads));
    out->write("{\"traceEvents\":[\n{\"name\":\"ncclwatch\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"ncclwatch\"}}", 0);
    shown.assign(n, 0);
    slices.assign(n, 0);
    overwritten.assign(n, 0);
  }
  std::unique_ptr<FileSink> open(size_t file, unsigned thread, ProcessTrace&) override {
    return std::make_unique<File>(*this, file, thread);
  }

 private:
  class File : public FileSink {
   public:
    File(TimelineSink& job, size_t file, unsigned thread) : job_(job), file_(file), thread_(thread) {}
    void start(const Start& s) override {
      int64_t offset = s.clock.known[file_] ? s.clock.offset_ns[file_] : 0;
      timeline_.emplace(file_ + 1, offset, job_.origin, job_.filter_, *job_.out, thread_, s.process);
    }
    void add(const RecordView& r) override { timeline_->add(r); }
    void finish(ProcessTrace& p, bool usable, std::vector<TraceProblem>&) override {
      if (usable && timeline_) {
        timeline_->finish(p);
        job_.slices[file_] = timeline_->slices;
        job_.overwritten[file_] = p.stats.overwritten();
        job_.shown[file_] = !timeline_->skipped;
      }
      job_.progress();
    }

   private:
    TimelineSink& job_;
    size_t file_;
    unsigned thread_;
    std::optional<FileTimeline> timeline_;
  };

  // Progress on stderr for long runs: a line a second or so once the first second has passed.
  void progress() {
    size_t finished = ++done_;
    auto now = std::chrono::steady_clock::now();
    std::lock_guard lock(progress_mutex_);
    if (now - last_progress_ > std::chrono::seconds(1) && finished < files_) {
      last_progress_ = now;
      say_line(fmt::format("timeline: {} of {} traces, {:.1f} s", finished, files_,
                           std::chrono::duration<double>(now - started_).count()));
    }
  }

  std::FILE* file_;
  bool gzip_;
  const TimelineFilter& filter_;
  std::chrono::steady_clock::time_point started_, last_progress_;
  size_t files_ = 0;
  std::atomic<size_t> done_{0};
  std::mutex progress_mutex_;
};

}  // namespace

int run_timeline(const Options& options) {
  if (options.output.empty()) {
    say_in("timeline", "-o FILE is required");
    return 2;
  }
  std::optional<TimelineFilter> filter = filter_of(options);
  if (!filter) return 2;
  auto started = std::chrono::steady_clock::now();
  std::FILE* f = std::fopen(options.output.c_str(), "wb");
  if (!f) {
    say("cannot write {}", options.output);
    return 2;
  }
  bool gzip = options.output.size() > 3 && options.output.compare(options.output.size() - 3, 3, ".gz") == 0;
  TimelineSink timeline(f, gzip, *filter, started);
  ReadOptions read;
  JobRead pass = read_job(options.inputs, read, {&timeline});
  const ClockModel& clock = pass.clock;
  const std::vector<char>& usable = pass.usable;
  const std::vector<char>& shown = timeline.shown;
  const std::vector<uint64_t>& slices = timeline.slices;
  const std::vector<uint64_t>& overwritten = timeline.overwritten;
  int64_t origin = timeline.origin;
  TimelineOutput& out = *timeline.out;
  const std::vector<TraceProblem>& problems = pass.problems;
  print_problems(problems);
  size_t used = static_cast<size_t>(std::count(usable.begin(), usable.end(), 1));
  uint64_t total_slices = 0;
  for (uint64_t s : slices) total_slices += s;
  size_t wrapped = static_cast<size_t>(std::count_if(overwritten.begin(), overwritten.end(), [](uint64_t n) { return n > 0; }));
  uint64_t older = 0;
  for (uint64_t n : overwritten) older += n;
  json other = {{"clock_alignment", clock.method}, {"hosts", clock.hosts}, {"origin_wall_ns", origin},
                {"window", wrapped ? fmt::format("{} of {} traces kept only their newest ops ({} older ring records "
                                                 "overwritten): their earlier ops are not drawn",
                                                 wrapped, used, older)
                                   : std::string("every op of every trace")},
                {"traces", used}, {"ranks_shown", std::count(shown.begin(), shown.end(), 1)}, {"op_slices", total_slices},
                {"tracks", "one process per rank; per application thread the NCCL calls as enqueued (ops without GPU "
                           "timing), per CUDA stream the GPU execution of GPU-timed launches; per communicator its "
                           "creation and release; tid 0: stalls; arrows link a collective's GPU-timed launches from rank to rank"}};
  out.write("\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":" + dump_json(other) + "}\n", 0);
  bool ok = out.finish();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) {
    // A truncated timeline is not one: a regular file is removed, a pipe or device left as it is.
    struct stat st{};
    bool removed = ::stat(options.output.c_str(), &st) == 0 && S_ISREG(st.st_mode) && std::remove(options.output.c_str()) == 0;
    say("writing {} failed (disk full or the reader gone){}", options.output, removed ? "; the partial file is removed" : "");
    return 2;
  }
  if (!used) return explain_nothing_usable();
  std::printf("timeline: %zu trace(s), %llu op slice(s), %.1f MB written to %s in %.1f s (open it in ui.perfetto.dev)\n",
              used, static_cast<unsigned long long>(total_slices), static_cast<double>(out.written()) / 1e6,
              options.output.c_str(), std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return 0;
}

}  // namespace ncclwatch::report
