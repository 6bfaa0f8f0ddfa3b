// The analyzers' building blocks: the latency histogram, nccl-tests' size and bandwidth
// conventions, the per-seq signature groups merged across reader threads, and how a process ended.
#include "model/op_model.h"
#include "reports/reports.h"
#include "synthetic_trace.h"

#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <sstream>

using namespace ncclwatch;
using namespace ncclwatch::report;
namespace fs = std::filesystem;

namespace {

std::string temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("ncclwatch-model-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

}  // namespace

TEST_CASE("histogram percentiles are within 2% of the exact ones") {
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> dist(11.0, 1.5);
  std::vector<int64_t> values;
  LatencyHistogram h;
  for (int i = 0; i < 100000; ++i) {
    auto v = static_cast<int64_t>(dist(rng));
    values.push_back(v);
    h.add(v);
  }
  std::sort(values.begin(), values.end());
  for (double p : {50.0, 90.0, 99.0, 99.9}) {
    auto exact = static_cast<double>(values[static_cast<size_t>(std::ceil(p / 100 * values.size())) - 1]);
    CHECK(std::abs(static_cast<double>(h.percentile(p)) - exact) <= 0.02 * exact + 1);
  }
  CHECK(h.max() == values.back());
  CHECK(h.min() == values.front());
  CHECK(h.count() == values.size());
  LatencyHistogram other;
  other.add(5);
  h.merge(other);
  CHECK(h.min() == 5);
  CHECK(h.count() == values.size() + 1);
}

TEST_CASE("histogram buckets cover every value once") {
  for (uint64_t v : {0ull, 1ull, 127ull, 128ull, 129ull, 1000ull, 123456789ull, 1ull << 40}) {
    size_t b = LatencyHistogram::bucket_of(v);
    CHECK(LatencyHistogram::bucket_low(b) <= v);
    CHECK(v < LatencyHistogram::bucket_low(b) + LatencyHistogram::bucket_width(b));
  }
  CHECK(LatencyHistogram::bucket_of(~0ull >> 1) == LatencyHistogram::kBuckets - 1);
}

TEST_CASE("the binomial tail matches a term-by-term sum in log space") {
  // Reference values: every term of the tail summed in log space (Python's math.lgamma).
  struct Case {
    uint64_t n, k;
    double p, tail;
  };
  const Case cases[] = {{7, 7, 0.5, 0.0078125},          {11, 10, 0.5, 0.005859375},
                        {20, 3, 0.25, 0.908739567535124}, {1000, 20, 1.0 / 64, 0.16075696064323755},
                        {100000, 1700, 1.0 / 64, 0.0002815090750820004},
                        {100000, 1500, 1.0 / 64, 0.9466329292975971},
                        {100000, 50000, 0.5, 0.5012615631744786}, {60, 1, 1.0 / 64, 0.6112821104344233}};
  for (const Case& c : cases) {
    INFO("n " << c.n << " k " << c.k << " p " << c.p);
    CHECK(binomial_tail(c.n, c.k, c.p) == Approx(c.tail).epsilon(1e-9));
  }
  CHECK(binomial_tail(100000, 100000, 0.5) < 1e-300);  // underflows to 0, never NaN
  CHECK(binomial_tail(5, 0, 0.3) == 1.0);
  CHECK(binomial_tail(5, 6, 0.3) == 0.0);
}

TEST_CASE("sizes and bus bandwidth follow nccl-tests") {
  using trace::Api;
  CHECK(bytes_of(Api::kAllReduce, 1000, 7, 8) == 4000);
  CHECK(bytes_of(Api::kAllGather, 1000, 7, 8) == 32000);      // sendcount x nranks
  CHECK(bytes_of(Api::kReduceScatter, 1000, 9, 8) == 16000);  // recvcount x nranks, bf16
  CHECK(bytes_of(Api::kAlltoAll, 10, 4, 4) == 320);
  CHECK(bytes_of(Api::kSend, 10, 0, 4) == 10);
  CHECK(busbw_factor(Api::kAllReduce, 8) == Approx(2.0 * 7 / 8));
  CHECK(busbw_factor(Api::kAllGather, 8) == Approx(7.0 / 8));
  CHECK(busbw_factor(Api::kReduceScatter, 4) == Approx(0.75));
  CHECK(busbw_factor(Api::kAlltoAll, 2) == Approx(0.5));
  CHECK(busbw_factor(Api::kBroadcast, 8) == 1.0);
  CHECK(busbw_factor(Api::kReduce, 8) == 1.0);
  CHECK(busbw_factor(Api::kSend, 2) == 1.0);
}

TEST_CASE("a mismatch is attributed to the odd rank whichever thread reads it first") {
  // Eight ranks; rank 0 (the first file, read first) is the odd one at seq 2, rank 5 at seq 4.
  testing::SimJob job = testing::world_job(8, 6);
  job.ranks[0].program[1].count = 77;
  job.ranks[5].program[3].redop = 2;
  std::string dir = temp_dir("threads");
  testing::write_job(job, dir);
  for (unsigned threads : {1u, 2u, 3u}) {
    AnalysisOptions options;
    options.threads = threads;
    JobAnalysis a = analyze_job({dir}, options);
    REQUIRE(a.comms.size() == 1);
    const CommOps& c = a.comms[0];
    auto seq2 = a.signature_groups(c, 2);
    REQUIRE(seq2.size() == 2);
    CHECK(seq2[0].second == std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7});
    CHECK(seq2[1].second == std::vector<int32_t>{0});
    CHECK(seq2[1].first.count == 77);
    auto seq4 = a.signature_groups(c, 4);
    REQUIRE(seq4.size() == 2);
    CHECK(seq4[1].second == std::vector<int32_t>{5});
    CHECK(seq4[1].first.redop == 2);
    CHECK(a.signature_groups(c, 3).size() == 1);
    CHECK(a.signature_groups(c, 3)[0].second.size() == 8);
    // Arrival of the last rank and completion per rank.
    for (const MemberRef& m : a.members.at(c.comm_id)) CHECK(a.member(m).completed_seq() == 6);
  }
  fs::remove_all(dir);
}

TEST_CASE("memory stays with seqs, not records: one slot per seq for all ranks") {
  testing::SimJob job = testing::world_job(16, 50);
  std::string dir = temp_dir("slots");
  testing::write_job(job, dir);
  JobAnalysis a = analyze_job({dir}, {});
  REQUIRE(a.comms.size() == 1);
  CHECK(a.comms[0].slots.size() == 50);
  CHECK(a.comms[0].slots[10].issued == 16);
  CHECK(a.latency.size() == 1);
  // every rank's first call is set apart from the steady state
  CHECK(a.latency[0].hist.count() == 16 * 49);
  CHECK(a.latency[0].first_calls.count == 16);
  fs::remove_all(dir);
}

TEST_CASE("NCCL version codes read as people write them") {
  using ncclwatch::report::nccl_version_text;
  CHECK(nccl_version_text("22809") == "2.28.9");
  CHECK(nccl_version_text("21803") == "2.18.3");
  CHECK(nccl_version_text("2804") == "2.8.4");  // before 2.9: major*1000 + minor*100 + patch
  CHECK(nccl_version_text("") == "unknown version");
  CHECK(nccl_version_text("0") == "unknown version");
  CHECK(nccl_version_text("2.28") == "unknown version");
}

TEST_CASE("text from a trace becomes valid UTF-8, one U+FFFD per byte that starts no character") {
  using ncclwatch::report::valid_utf8;
  const std::string fffd = "\xEF\xBF\xBD";
  CHECK(valid_utf8("world") == "world");
  CHECK(valid_utf8("w\xC3\xB6rld") == "w\xC3\xB6rld");              // valid two-byte character kept
  CHECK(valid_utf8("\xF0\x9F\x98\x80") == "\xF0\x9F\x98\x80");      // and a four-byte one
  CHECK(valid_utf8(std::string("a\0b", 3)) == std::string("a\0b", 3));  // NUL is text (JSON escapes it)
  CHECK(valid_utf8("w\xC3") == "w" + fffd);                           // cut in the middle of a character
  CHECK(valid_utf8("job\xE9") == "job" + fffd);                       // Latin-1
  CHECK(valid_utf8("n\xFF\xFE" "de0") == "n" + fffd + fffd + "de0");
  CHECK(valid_utf8("\xC0\xAF") == fffd + fffd);                       // overlong "/"
  CHECK(valid_utf8("\xED\xA0\x80") == fffd + fffd + fffd);            // a UTF-16 surrogate
  CHECK(valid_utf8("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd); // past U+10FFFF
  CHECK(valid_utf8("\xE2\x82") == fffd + fffd);                       // truncated three-byte sequence
}

TEST_CASE("text for a terminal: every control character and byte that is not UTF-8 escaped, once") {
  using ncclwatch::model::LineBreaks;
  using ncclwatch::model::printable_text;
  CHECK(printable_text("tp-world \\ \xC3\xB6 \xF0\x9F\x98\x80") == "tp-world \\ \xC3\xB6 \xF0\x9F\x98\x80");  // kept
  CHECK(printable_text("\x1B]0;t\x07\x1B[31m") == "\\x1b]0;t\\x07\\x1b[31m");  // OSC retitle, CSI colour
  CHECK(printable_text("a\nb\tc\rd") == "a\\x0ab\\x09c\\x0dd");               // a line break forges a line
  CHECK(printable_text("a\nb", LineBreaks::kKept) == "a\nb");
  CHECK(printable_text(std::string("a\0b\x7F", 4)) == "a\\x00b\\x7f");           // NUL, DEL
  CHECK(printable_text("\xC2\x9B" "2J \xC2\x85 \xC2\xA0") == "\\u009b2J \\u0085 \xC2\xA0");  // C1; NBSP is text
  CHECK(printable_text("job\xE9 \xC0\xAF") == "job\\xe9 \\xc0\\xaf");          // not UTF-8
  for (std::string_view hostile : {"\x1B[2J\n\x9B\xC2\x9B", "\\x1b", "\xFF\x07"})
    CHECK(printable_text(printable_text(hostile)) == printable_text(hostile));  // once is enough
}

TEST_CASE("the ranks a latency row counts are kept by rank seen, not by rank value") {
  std::vector<int32_t> ranks;
  for (int32_t r : {5, 5, 1, 1 << 30, 3, 5, 1}) note_rank(ranks, r);
  CHECK(ranks == std::vector<int32_t>{1, 3, 5, 1 << 30});
}

TEST_CASE("ranks read as ranges, bounded") {
  using ncclwatch::report::ranks_text;
  CHECK(ranks_text({0, 1}) == "0,1");
  CHECK(ranks_text({1}) == "1");
  std::vector<int32_t> all(64);
  for (int32_t i = 0; i < 64; ++i) all[static_cast<size_t>(i)] = i;
  CHECK(ranks_text(all) == "0-63");
  CHECK(ranks_text({0, 2, 3, 4, 9}) == "0,2-4,9");
  std::vector<int32_t> evens;
  for (int32_t i = 0; i < 100; i += 2) evens.push_back(i);
  CHECK(ranks_text(evens, 4) == "0,2,4,6,... (50 ranks)");
}

TEST_CASE("a trace cut short while it is read is read as it was when opened, never a SIGBUS") {
  // Anyone may truncate a file in a shared trace folder, at any moment: a reader that maps the file
  // gets SIGBUS at its next access past the new end.
  std::string path = temp_dir("cut-while-read") + "/rank0.nwt";
  constexpr uint64_t kOps = 20000;  // ~2 MB of records, far past the page the file is cut to
  {
    testing::TraceFileWriter w(path, "node0", 1000, 1'700'000'000'000'000'000, 1'000'000'000);
    w.strings(trace::RecordType::kProcess, 1'000'000'000, {"host=node0"});
    for (uint64_t s = 1; s <= kOps; ++s) {
      trace::OpRecord o{};
      o.comm_id = 0xC0FFEE;
      o.seq = s;
      o.api = static_cast<uint16_t>(trace::Api::kAllReduce);
      o.host_begin_ns = 1'000'000'000 + static_cast<int64_t>(s) * 1000;
      o.host_end_ns = o.host_begin_ns + 500;
      w.op(o);
    }
  }
  uint64_t ops = 0;
  bool cut = false;
  trace::FileHeader header{};
  ReadStats stats;
  std::vector<TraceProblem> problems;
  bool ok = read_trace(
      path,
      [&](const RecordView& r) {
        if (!cut) REQUIRE(truncate(path.c_str(), trace::kHeaderBytes) == 0);
        cut = true;
        ops += r.type == trace::RecordType::kCollective;
      },
      header, stats, problems);
  CHECK(ok);
  CHECK(ops == kOps);
  // Read again, the file is what is left of it: a header alone, named.
  ops = 0;
  problems.clear();
  ReadStats again;
  CHECK_FALSE(read_trace(path, [&](const RecordView&) { ++ops; }, header, again, problems));
  CHECK(ops == 0);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].what.find("no records") != std::string::npos);
  fs::remove_all(fs::path(path).parent_path());
}

TEST_CASE("a JSON report written entry by entry is the same text as written whole") {
  nlohmann::json head = {{"traces", 2}, {"verdict", "a \"quoted\"\nline"}, {"zeta", {{"x", {1, 2}}, {"y", nlohmann::json::array()}}}};
  auto entry = [](size_t i) {
    return nlohmann::json{{"comm", std::to_string(i)}, {"ranks", {0, 1}}, {"nested", {{"empty", nlohmann::json::object()}}},
                          {"late_ms", 0.25 * static_cast<double>(i)}};
  };
  std::vector<StreamedArray> arrays = {{"comms", 3, entry}, {"absent", 0, entry}, {"leaks", 1, entry}};
  nlohmann::json whole = head;
  for (const StreamedArray& a : arrays) {
    whole[a.key] = nlohmann::json::array();
    for (size_t i = 0; i < a.size; ++i) whole[a.key].push_back(a.entry(i));
  }
  std::ostringstream streamed;
  write_json_streamed(streamed, head, arrays);
  CHECK(streamed.str() == dump_json(whole, 2));
}

TEST_CASE("a teardown that never returned is looked at first, unless the ranks' programs differed before it") {
  LeakReport leaks;
  TeardownHang& h = leaks.teardown_hangs.emplace_back();
  h.comm_id = 0xab;
  h.api = trace::Api::kCommFinalize;
  h.ranks = {0, 1};
  h.longest_inside_s = 36.04;
  h.until = "SIGTERM";
  HangReport hang;
  hang.findings = true;
  hang.incomplete_ranks = 2;  // ops without a timing: what a graph's captured op looks like
  hang.verdict = "every rank issued seq 4 but it never completed";
  CHECK(first_look_at(leaks, hang) ==
        "teardown hung: ncclCommFinalize entered on rank(s) 0,1 of comm 00000000000000ab and never returned (36.0 s until "
        "SIGTERM) — run `ncclwatch-report hang`");
  hang.missing_ranks = 1;  // a rank never issued what the others did: why the teardown waits
  CHECK(first_look_at(leaks, hang) == hang.verdict);
}

TEST_CASE("how a process ended names the sender of its signal as far as the record tells") {
  model::ProcessTrace p;
  p.header.pid = 500;
  trace::ExitRecord end{};
  end.reason = static_cast<uint32_t>(trace::ExitReason::kSignal);
  end.signal = SIGTERM;
  p.process_end = end;
  CHECK(model::process_ending_text(p) == "was killed by SIGTERM");  // a trace without the record (format 6)
  trace::SignalRecord sent{};
  sent.signal = SIGTERM;
  sent.code = SI_USER;
  sent.sender_pid = 42;
  sent.sender_uid = 1000;
  sent.sender_is_parent = 1;
  std::memcpy(sent.sender_name, "torchrun", 8);
  p.signals = {sent};
  CHECK(model::process_ending_text(p) == "was killed by SIGTERM, sent by pid 42 (torchrun, its parent, uid 1000)");
  // A name of 16 bytes with no terminator and a control byte: read within the field, escaped.
  std::memset(sent.sender_name, 'x', sizeof(sent.sender_name));
  sent.sender_name[3] = '\x1b';
  sent.sender_is_parent = 0;
  p.signals = {sent};
  CHECK(model::process_ending_text(p) == "was killed by SIGTERM, sent by pid 42 (xxx\\x1bxxxxxxxxxxxx, uid 1000)");
  // Handled, then exited its own way; sent by itself; by the kernel.
  sent.handled = 1;
  sent.sender_pid = 500;
  p.signals = {sent};
  end.reason = static_cast<uint32_t>(trace::ExitReason::kExited);
  end.signal = 0;
  p.process_end = end;
  CHECK(model::process_ending_text(p) == "exited with status 0 after SIGTERM, sent by the process itself");
  sent.sender_pid = 0;
  sent.code = SI_KERNEL;
  p.signals = {sent};
  CHECK(model::process_ending_text(p) == "exited with status 0 after SIGTERM, sent by the kernel");
}
