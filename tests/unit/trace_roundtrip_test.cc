// The trace file written by the shim's writer and read back by the analyzers' reader, whole and
// damaged: truncated anywhere, holes, garbage, empty, a newer format.
#include "process/clock.h"
#include "trace/trace_writer.h"
#include "model/trace_reader.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace ncclwatch;
using namespace ncclwatch::trace;
namespace fs = std::filesystem;

namespace {

fs::path test_dir() {
  static fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("ncclwatch-unit-" + std::to_string(getpid()));
    fs::create_directories(d);
    setenv("NCCLWATCH_DIR", (d / "traces").c_str(), 1);  // read by the writer at its first record
    return d;
  }();
  return dir;
}

// Writes `n` ApiEvents through the real writer; returns the file's path.
std::string write_events(int n) {
  test_dir();
  for (int i = 0; i < n; ++i) {
    RecordSlot slot = reserve_record(sizeof(ApiEvent));
    REQUIRE(slot);
    auto* e = slot.as<ApiEvent>();
    e->call_id = static_cast<uint64_t>(i + 1);
    e->api = static_cast<uint16_t>(Api::kCommInitRank);
    e->time_ns = monotonic_ns();
    slot.commit(RecordType::kCallBegin);
  }
  return trace_path_c();
}

struct ReadResult {
  bool ok;
  std::vector<uint64_t> call_ids;
  model::ReadStats stats;
  std::vector<model::TraceProblem> problems;
};

ReadResult read_file(const std::string& path) {
  ReadResult r;
  FileHeader header{};
  r.ok = model::read_trace(
      path,
      [&](const model::RecordView& v) {
        if (v.type == RecordType::kCallBegin) r.call_ids.push_back(v.as<ApiEvent>()->call_id);
      },
      header, r.stats, r.problems);
  return r;
}

std::vector<char> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), {});
}

std::string write_copy(const std::vector<char>& bytes, size_t length, const std::string& name) {
  std::string path = (test_dir() / name).string();
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(length));
  return path;
}

bool mentions(const std::vector<model::TraceProblem>& problems, const std::string& text) {
  for (const auto& p : problems)
    if (p.what.find(text) != std::string::npos) return true;
  return false;
}

const std::string& reference_file() {
  static std::string path = write_events(200);
  return path;
}

}  // namespace

TEST_CASE("every committed record reads back in order") {
  ReadResult r = read_file(reference_file());
  REQUIRE(r.ok);
  // The first 200 ids are ours; the process record written at open is not a CallBegin.
  REQUIRE(r.call_ids.size() == 200);
  for (size_t i = 0; i < r.call_ids.size(); ++i) CHECK(r.call_ids[i] == i + 1);
  CHECK(r.problems.empty());
}

TEST_CASE("a file truncated anywhere gives back every record before the cut") {
  std::vector<char> bytes = slurp(reference_file());
  const size_t record = sizeof(ApiEvent);
  size_t last_count = 0;
  for (size_t cut = kHeaderBytes; cut < kHeaderBytes + 40 * record; cut += 24) {
    ReadResult r = read_file(write_copy(bytes, cut, "truncated.nwt"));
    if (!r.ok) {  // a cut before the first whole record leaves a file with no records: refused
      CHECK(last_count == 0);
      continue;
    }
    CHECK(r.call_ids.size() >= last_count);  // more file never means fewer records
    last_count = r.call_ids.size();
    for (size_t i = 0; i < r.call_ids.size(); ++i) REQUIRE(r.call_ids[i] == i + 1);
  }
  CHECK(last_count > 30);
}

TEST_CASE("a hole left by a writer that died mid-record is skipped") {
  std::vector<char> bytes = slurp(reference_file());
  ReadResult whole = read_file(reference_file());
  // Find the 10th CallBegin's offset by scanning like the reader does, then zero its header.
  size_t offset = kHeaderBytes;
  int seen = 0;
  while (true) {
    uint32_t size, word;
    std::memcpy(&size, &bytes[offset], 4);
    std::memcpy(&word, &bytes[offset + 4], 4);
    if ((word & 0xffff) == static_cast<uint32_t>(RecordType::kCallBegin) && ++seen == 10) break;
    offset += size;
  }
  SECTION("header never written") { std::memset(&bytes[offset], 0, 8); }
  SECTION("sized but never committed") { std::memset(&bytes[offset + 4], 0, 4); }
  ReadResult r = read_file(write_copy(bytes, bytes.size(), "hole.nwt"));
  REQUIRE(r.ok);
  CHECK(r.call_ids.size() == whole.call_ids.size() - 1);
  CHECK(std::find(r.call_ids.begin(), r.call_ids.end(), 10u) == r.call_ids.end());
  CHECK(r.call_ids.back() == 200);
}

TEST_CASE("unusable files are named with what is wrong") {
  std::vector<char> bytes = slurp(reference_file());
  SECTION("empty") {
    ReadResult r = read_file(write_copy(bytes, 0, "empty.nwt"));
    CHECK_FALSE(r.ok);
    CHECK(mentions(r.problems, "empty file"));
  }
  SECTION("garbage") {
    std::vector<char> garbage(10000);
    for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>(i * 7919 % 251);
    ReadResult r = read_file(write_copy(garbage, garbage.size(), "garbage.nwt"));
    CHECK_FALSE(r.ok);
    CHECK(mentions(r.problems, "not an ncclwatch trace"));
  }
  SECTION("cut inside the header") {
    ReadResult r = read_file(write_copy(bytes, 100, "short.nwt"));
    CHECK_FALSE(r.ok);
    CHECK(mentions(r.problems, "truncated inside the file header"));
  }
  SECTION("written by a newer format") {
    auto* header = reinterpret_cast<FileHeader*>(bytes.data());
    header->version = kVersion + 5;
    header->min_reader_version = kVersion + 3;
    ReadResult r = read_file(write_copy(bytes, bytes.size(), "newer.nwt"));
    CHECK_FALSE(r.ok);
    CHECK(mentions(r.problems, "newer ncclwatch"));
  }
  SECTION("written in a format older than this reader reads") {
    auto* header = reinterpret_cast<FileHeader*>(bytes.data());
    header->version = kOldestReadableFormat - 1;
    header->min_reader_version = 1;
    ReadResult r = read_file(write_copy(bytes, bytes.size(), "older.nwt"));
    CHECK_FALSE(r.ok);
    CHECK(mentions(r.problems, "older than this reader reads"));
  }
  SECTION("a missing file") {
    ReadResult r = read_file((test_dir() / "absent.nwt").string());
    CHECK_FALSE(r.ok);
    CHECK(mentions(r.problems, "cannot open"));
  }
}

TEST_CASE("garbage in the middle costs only the damaged span") {
  std::vector<char> bytes = slurp(reference_file());
  size_t middle = kHeaderBytes + 50 * sizeof(ApiEvent) + 8;
  for (size_t i = 0; i < 3 * sizeof(ApiEvent); ++i) bytes[middle + i] = static_cast<char>(0x5a);
  ReadResult r = read_file(write_copy(bytes, bytes.size(), "damaged.nwt"));
  REQUIRE(r.ok);
  CHECK(r.call_ids.size() >= 195);
  CHECK(r.call_ids.back() == 200);
  CHECK(mentions(r.problems, "corrupt span"));
}
