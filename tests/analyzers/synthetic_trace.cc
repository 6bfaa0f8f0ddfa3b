#include "synthetic_trace.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace ncclwatch::testing {

using namespace trace;

TraceFileWriter::TraceFileWriter(const std::string& path, const std::string& host, uint32_t pid, int64_t start_wall_ns,
                                 int64_t start_mono_ns)
    : buffer_(1 << 20) {
  f_ = std::fopen(path.c_str(), "wb");
  if (!f_) throw std::runtime_error("cannot write " + path);
  std::setvbuf(f_, buffer_.data(), _IOFBF, buffer_.size());
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.min_reader_version = kMinReadableVersion;
  h.header_bytes = kHeaderBytes;
  h.pid = pid;
  h.ppid = 1;
  h.start_wall_ns = start_wall_ns;
  h.start_mono_ns = start_mono_ns;
  std::strncpy(h.host, host.c_str(), sizeof(h.host) - 1);
  std::fwrite(&h, sizeof(h), 1, f_);
}

TraceFileWriter::~TraceFileWriter() {
  if (f_) std::fclose(f_);
}

void TraceFileWriter::put(RecordType type, void* record, size_t size, const void* tail, size_t tail_bytes) {
  uint32_t total = padded_size(size + tail_bytes);
  auto* h = static_cast<RecordHeader*>(record);
  h->size = total;
  h->type = static_cast<uint16_t>(type);
  h->commit = kCommitMark;
  std::fwrite(record, size, 1, f_);
  if (tail_bytes) std::fwrite(tail, tail_bytes, 1, f_);
  static const char zeros[8] = {};
  if (total > size + tail_bytes) std::fwrite(zeros, total - size - tail_bytes, 1, f_);
  ++records_;
}

void TraceFileWriter::strings(RecordType type, int64_t time_ns, const std::vector<std::string>& entries) {
  std::string blob;
  for (const std::string& e : entries) blob += e + '\0';
  StringsRecord r{};
  r.time_ns = time_ns;
  r.bytes = static_cast<uint32_t>(blob.size());
  put(type, &r, sizeof(r), blob.data(), blob.size());
}

void TraceFileWriter::call(RecordType type, ApiEvent e, const std::string& name) {
  e.nframes = 0;
  e.name_len = static_cast<uint16_t>(name.size());
  put(type, &e, sizeof(e), name.data(), name.size());
}

void TraceFileWriter::op(OpRecord o) { put(RecordType::kCollective, &o, sizeof(o)); }
void TraceFileWriter::timing(GpuTimingRecord g) { put(RecordType::kGpuTiming, &g, sizeof(g)); }
void TraceFileWriter::exit(RecordType type, ExitRecord r) { put(type, &r, sizeof(r)); }

void TraceFileWriter::stall(StallRecord s, const std::vector<StallComm>& comms) {
  s.ncomms = static_cast<uint32_t>(comms.size());
  put(RecordType::kStall, &s, sizeof(s), comms.data(), comms.size() * sizeof(StallComm));
}

namespace {

constexpr int64_t kEpoch = 1'700'000'000'000'000'000;  // wall time of the job's start
constexpr int64_t kStart = 5'000'000'000;              // "true" time of the job's start
constexpr int64_t kStallAfter = 10'000'000'000;         // the watchdog's NCCLWATCH_STALL_SEC

struct Issued {
  int rank;
  int64_t time;
};

// One rank's records, in the order its shim would write them.
struct RankLog {
  std::vector<std::pair<int, size_t>> order;  // (kind, index) 0 op 1 timing
  std::vector<OpRecord> ops;
  std::vector<GpuTimingRecord> timings;
};

}  // namespace

std::vector<std::string> write_job(const SimJob& job, const std::string& dir) {
  std::filesystem::create_directories(dir);
  size_t n = job.ranks.size();
  struct State {
    size_t next = 0;
    int64_t t = kStart;
    bool blocked = false;
    int comm = -1;
    uint64_t seq = 0;
    size_t op_index = 0;
    std::map<int, uint64_t> seqs;
    std::map<std::pair<int, int>, uint64_t> p2p_seqs;
    uint64_t launch = 0;
  };
  std::vector<State> st(n);
  std::vector<RankLog> logs(n);
  std::map<std::pair<int, uint64_t>, std::vector<Issued>> issued;
  uint64_t noise = 0x9E3779B97F4A7C15ull;
  auto jitter = [&] {
    noise = noise * 6364136223846793005ull + 1442695040888963407ull;
    return job.jitter_ns ? static_cast<int64_t>((noise >> 33) % static_cast<uint64_t>(job.jitter_ns)) : 0;
  };
  auto comm_rank = [&](int comm, int global) {
    const auto& m = job.comms[static_cast<size_t>(comm)].members;
    return static_cast<int32_t>(std::find(m.begin(), m.end(), global) - m.begin());
  };

  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < n; ++r) {
      State& s = st[r];
      if (s.blocked || s.next >= job.ranks[r].program.size()) continue;
      const SimCall& c = job.ranks[r].program[s.next++];
      s.t += c.delay_ns + jitter();
      const SimComm& comm = job.comms[static_cast<size_t>(c.comm)];
      OpRecord o{};
      o.comm_id = comm.id;
      o.comm = 0x1000 + static_cast<uint64_t>(c.comm);
      o.count = c.count;
      o.stream = 0x7f0000005000ull;
      o.host_begin_ns = s.t;
      o.host_end_ns = s.t + 5000;
      o.launch_id = ++s.launch;
      o.tid = job.ranks[r].pid;
      o.api = static_cast<uint16_t>(c.api);
      o.peer = c.peer;
      o.rank = comm_rank(c.comm, static_cast<int>(r));
      o.nranks = static_cast<int32_t>(comm.members.size());
      o.datatype = c.datatype;
      o.redop = c.redop;
      o.flags = job.ranks[r].timed ? kOpTimed : 0;
      o.seq = ++s.seqs[c.comm];
      logs[r].order.emplace_back(0, logs[r].ops.size());
      logs[r].ops.push_back(o);
      issued[{c.comm, o.seq}].push_back({static_cast<int>(r), s.t});
      s.blocked = true;
      s.comm = c.comm;
      s.seq = o.seq;
      s.op_index = logs[r].ops.size() - 1;
      progress = true;
    }
    for (size_t r = 0; r < n; ++r) {
      State& s = st[r];
      if (!s.blocked) continue;
      const auto& arrivals = issued[{s.comm, s.seq}];
      if (arrivals.size() < job.comms[static_cast<size_t>(s.comm)].members.size()) continue;
      int64_t last = 0;
      for (const Issued& i : arrivals) last = std::max(last, i.time);
      int64_t done = last + job.op_ns;
      const OpRecord& o = logs[r].ops[s.op_index];
      if (job.ranks[r].timed) {
        GpuTimingRecord g{};
        g.launch_id = o.launch_id;
        g.stream = o.stream;
        g.gpu_begin_ns = o.host_begin_ns + 2000;
        g.gpu_end_ns = done;
        g.clock_error_ns = 1000;
        g.ops = 1;
        g.flags = kTimingHasBegin;
        logs[r].order.emplace_back(1, logs[r].timings.size());
        logs[r].timings.push_back(g);
      }
      s.t = done + 3000;
      s.blocked = false;
      progress = true;
    }
  }

  std::vector<std::string> paths;
  for (size_t r = 0; r < n; ++r) {
    const SimRank& rank = job.ranks[r];
    int64_t mono_base = job.mono_base_ns.count(rank.host) ? job.mono_base_ns.at(rank.host) : 0;
    int64_t skew = job.wall_skew_ns.count(rank.host) ? job.wall_skew_ns.at(rank.host) : 0;
    auto mono = [&](int64_t t) { return t + mono_base; };
    std::string path = dir + "/" + rank.host + "-" + std::to_string(rank.pid) + "-1.nwt";
    paths.push_back(path);
    int64_t start = kStart - 500'000'000;
    TraceFileWriter w(path, rank.host, rank.pid, start + kEpoch + skew, mono(start));
    std::vector<std::string> env = {"host=" + rank.host, "pid=" + std::to_string(rank.pid)};
    for (const auto& [k, v] : rank.env) env.push_back("env." + k + "=" + v);
    w.strings(RecordType::kProcess, mono(start), env);
    w.strings(RecordType::kLibrary, mono(start), {"path=/usr/lib/libnccl.so.2", "version=" + rank.nccl_version});
    // The communicators this rank is a member of, created before the first op.
    uint64_t call_id = 0;
    std::vector<int> mine;
    for (size_t c = 0; c < job.comms.size(); ++c) {
      const auto& m = job.comms[c].members;
      if (std::find(m.begin(), m.end(), static_cast<int>(r)) == m.end()) continue;
      mine.push_back(static_cast<int>(c));
      ApiEvent e{};
      e.call_id = ++call_id;
      e.time_ns = mono(start + 100'000'000 + static_cast<int64_t>(c) * 1'000'000);
      e.tid = rank.pid;
      e.api = static_cast<uint16_t>(Api::kCommInitRank);
      e.comm_id = job.comms[c].id;
      e.rank = comm_rank(static_cast<int>(c), static_cast<int>(r));
      e.nranks = static_cast<int32_t>(m.size());
      e.device = e.rank;
      w.call(RecordType::kCallBegin, e, job.comms[c].name);
      e.time_ns += 300'000;
      e.comm = 0x1000 + c;
      w.call(RecordType::kCallEnd, e);
    }
    for (const auto& [kind, index] : logs[r].order) {
      if (kind == 0) {
        OpRecord o = logs[r].ops[index];
        o.host_begin_ns = mono(o.host_begin_ns);
        o.host_end_ns = mono(o.host_end_ns);
        w.op(o);
      } else {
        GpuTimingRecord g = logs[r].timings[index];
        g.gpu_begin_ns = mono(g.gpu_begin_ns);
        g.gpu_end_ns = mono(g.gpu_end_ns);
        w.timing(g);
      }
    }
    const State& s = st[r];
    if (s.blocked) {
      if (job.stalls) {
        const OpRecord& o = logs[r].ops[s.op_index];
        StallRecord sr{};
        sr.time_ns = mono(o.host_begin_ns + kStallAfter);
        sr.launch_id = o.launch_id;
        sr.comm_id = o.comm_id;
        sr.seq = o.seq;
        sr.enqueued_ns = mono(o.host_begin_ns);
        sr.api = o.api;
        sr.state = static_cast<uint32_t>(StallState::kStalled);
        std::vector<StallComm> snapshot;
        for (int c : mine) {
          uint64_t last = s.seqs.count(c) ? s.seqs.at(c) : 0;
          uint64_t done = c == s.comm ? last - 1 : last;
          snapshot.push_back({job.comms[static_cast<size_t>(c)].id, last, done, comm_rank(c, static_cast<int>(r)),
                              static_cast<int32_t>(job.comms[static_cast<size_t>(c)].members.size())});
        }
        w.stall(sr, snapshot);
      }
      continue;  // hung: killed later, no final record
    }
    if (!rank.exits) continue;  // died after its last op
    int64_t t = s.t + 1'000'000;
    for (int c : mine) {
      ApiEvent e{};
      e.call_id = ++call_id;
      e.time_ns = mono(t);
      e.tid = rank.pid;
      e.api = static_cast<uint16_t>(Api::kCommDestroy);
      e.comm = 0x1000 + static_cast<uint64_t>(c);
      e.comm_id = job.comms[static_cast<size_t>(c)].id;
      e.rank = comm_rank(c, static_cast<int>(r));
      e.nranks = static_cast<int32_t>(job.comms[static_cast<size_t>(c)].members.size());
      w.call(RecordType::kCallBegin, e);
      e.time_ns = mono(t + 200'000);
      w.call(RecordType::kCallEnd, e);
      t += 300'000;
    }
    ExitRecord x{};
    x.time_ns = mono(t);
    x.reason = static_cast<uint32_t>(ExitReason::kNormal);
    w.exit(RecordType::kExitBegin, x);
    w.exit(RecordType::kProcessEnd, x);
  }
  return paths;
}

SimJob world_job(int nranks, int steps, uint64_t count) {
  SimJob job;
  SimComm world;
  world.id = 0xA11CE00000000001ull;
  world.name = "world";
  for (int r = 0; r < nranks; ++r) world.members.push_back(r);
  job.comms.push_back(world);
  for (int r = 0; r < nranks; ++r) {
    SimRank rank;
    rank.pid = 1000 + static_cast<uint32_t>(r);
    for (int s = 0; s < steps; ++s) {
      SimCall c;
      c.count = count;
      rank.program.push_back(c);
    }
    job.ranks.push_back(rank);
  }
  return job;
}

}  // namespace ncclwatch::testing
