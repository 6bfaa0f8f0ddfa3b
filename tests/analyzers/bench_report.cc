// Generates a synthetic job (default 256 ranks x 100,000 collectives, each with its GPU timing
// record, or 1 in --sample N as the shim's default sampling gives) and measures how fast the hang
// and latency analyses read it, in records per second, and how long the timeline takes to write
// and how large it is (gzip, with and without flow arrows).
//   bench_report [--ranks N] [--ops N] [--sample N] [--dir DIR] [--keep] [--timeline]
#include "model/op_model.h"
#include "reports/reports.h"
#include "synthetic_trace.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

using namespace ncclwatch;
using namespace ncclwatch::report;
using trace::Api;
namespace fs = std::filesystem;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void write_rank(const std::string& dir, int rank, int nranks, uint64_t ops, uint64_t sample) {
  const int64_t start = 1'000'000'000;
  std::string host = "node" + std::to_string(rank / 8);
  testing::TraceFileWriter w(dir + "/" + host + "-" + std::to_string(10000 + rank) + "-1.nwt", host,
                             static_cast<uint32_t>(10000 + rank), 1'700'000'000'000'000'000 + start, start);
  w.strings(trace::RecordType::kProcess, start, {"host=" + host, "env.NCCL_DEBUG=WARN"});
  trace::ApiEvent e{};
  e.call_id = 1;
  e.time_ns = start + 1000;
  e.api = static_cast<uint16_t>(Api::kCommInitRank);
  e.comm_id = 0xBE4C000000000001ull;
  e.rank = rank;
  e.nranks = nranks;
  w.call(trace::RecordType::kCallBegin, e, "world");
  e.time_ns += 1'000'000;
  e.comm = 0x1000;
  w.call(trace::RecordType::kCallEnd, e);
  static constexpr uint64_t sizes[] = {1 << 10, 1 << 16, 1 << 20, 1 << 24};
  int64_t t = start + 10'000'000;
  for (uint64_t s = 1; s <= ops; ++s) {
    trace::OpRecord o{};
    o.comm_id = e.comm_id;
    o.comm = 0x1000;
    o.seq = s;
    o.count = sizes[s % 4];
    o.stream = 0x5000;
    o.host_begin_ns = t + (rank * 7919 + static_cast<int64_t>(s) * 104729) % 20000;
    o.host_end_ns = o.host_begin_ns + 4000;
    o.launch_id = s;
    o.api = static_cast<uint16_t>(Api::kAllReduce);
    o.peer = -1;
    o.rank = rank;
    o.nranks = nranks;
    o.datatype = 7;
    o.redop = 0;
    bool timed = s % sample == 1 % sample;
    o.flags = timed ? trace::kOpTimed : 0;
    w.op(o);
    trace::GpuTimingRecord g{};
    g.launch_id = s;
    g.stream = 0x5000;
    g.gpu_begin_ns = o.host_begin_ns + 3000;
    g.gpu_end_ns = t + 30000 + static_cast<int64_t>(o.count / 100);
    g.ops = 1;
    g.flags = trace::kTimingHasBegin;
    if (timed) w.timing(g);
    t = g.gpu_end_ns + 50000;
  }
}

long peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024;
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 256;
  uint64_t ops = 100000;
  std::string dir;
  bool keep = false, timeline = false;
  uint64_t sample = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ranks" && i + 1 < argc) ranks = std::stoi(argv[++i]);
    else if (a == "--ops" && i + 1 < argc) ops = std::stoull(argv[++i]);
    else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--sample" && i + 1 < argc) sample = std::max<uint64_t>(1, std::stoull(argv[++i]));
    else if (a == "--keep") keep = true;
    else if (a == "--timeline") timeline = true;
    else {
      std::fprintf(stderr, "usage: bench_report [--ranks N] [--ops N] [--sample N] [--dir DIR] [--keep] [--timeline]\n");
      return 2;
    }
  }
  if (dir.empty()) dir = (fs::temp_directory_path() / ("ncclwatch-bench-" + std::to_string(getpid()))).string();
  bool reuse = fs::exists(dir) && !fs::is_empty(dir);
  if (!reuse) {
    fs::create_directories(dir);
    auto t0 = std::chrono::steady_clock::now();
    parallel_for(static_cast<size_t>(ranks), reader_threads(static_cast<size_t>(ranks)),
                 [&](size_t r, unsigned) { write_rank(dir, static_cast<int>(r), ranks, ops, sample); });
    std::printf("generated %d ranks x %llu collectives (GPU timing for 1 in %llu) in %.1f s into %s\n", ranks,
                static_cast<unsigned long long>(ops), static_cast<unsigned long long>(sample), seconds_since(t0), dir.c_str());
  }
  uintmax_t bytes = 0;
  for (const auto& e : fs::directory_iterator(dir)) bytes += e.file_size();

  auto measure = [&](const char* name, bool align, auto&& report) {
    for (int round = 0; round < 2; ++round) {
      auto t0 = std::chrono::steady_clock::now();
      AnalysisOptions options;
      options.align_clocks = align;
      JobAnalysis a = analyze_job({dir}, options);
      size_t answer = report(a);
      double s = seconds_since(t0);
      std::printf("%-8s round %d: %llu records (%.2f GB) in %.2f s = %.1f million records/s on %u threads; "
                  "answer size %zu; peak RSS %ld MB\n",
                  name, round + 1, static_cast<unsigned long long>(a.records), static_cast<double>(bytes) / 1e9, s,
                  static_cast<double>(a.records) / s / 1e6, reader_threads(a.files.size()), answer, peak_rss_mb());
    }
  };
  measure("hang", true, [](const JobAnalysis& a) { return to_json(hang_report(a)).dump().size(); });
  measure("latency", false, [](const JobAnalysis& a) { return to_json(latency_table(a)).dump().size(); });
  if (timeline) {
    for (bool flows : {true, false}) {
      Options options;
      options.inputs = {dir};
      options.output = dir + "/../ncclwatch-bench-timeline-" + std::to_string(getpid()) + ".json.gz";
      options.timeline_no_flows = !flows;
      auto t0 = std::chrono::steady_clock::now();
      int status = run_timeline(options);
      double s = seconds_since(t0);
      std::printf("timeline %s: exit %d in %.2f s, %.1f MB gzip; peak RSS %ld MB\n", flows ? "with flows" : "--no-flows",
                  status, s, static_cast<double>(fs::file_size(options.output)) / 1e6, peak_rss_mb());
      fs::remove(options.output);
    }
  }
  if (!keep && !reuse) fs::remove_all(dir);
  return 0;
}
