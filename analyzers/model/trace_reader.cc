#include "trace_reader.h"

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

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

// A header that a writer committed: plausible size, commit mark, fits in the file.
bool plausible_header(const std::byte* base, uint64_t offset, uint64_t file_size) {
  if (offset + sizeof(RecordHeader) > file_size) return false;
  uint32_t size = load_u32(base + offset);
  uint32_t word = load_u32(base + offset + 4);
  return (word >> 16) == kCommitMark && size >= sizeof(RecordHeader) && size % 8 == 0 && size <= kMaxRecordBytes &&
         offset + size <= file_size;
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

  uint64_t offset = header.header_bytes;
  uint64_t corrupt_spans = 0;
  while (offset + sizeof(RecordHeader) <= file_size) {
    uint32_t size = load_u32(map.data + offset);
    uint32_t word = load_u32(map.data + offset + 4);
    if (plausible_header(map.data, offset, file_size)) {
      uint16_t type = static_cast<uint16_t>(word & 0xffff);
      if (known_type(type) && type != static_cast<uint16_t>(RecordType::kPadding)) {
        ++stats.records;
        if (!visit(RecordView{static_cast<RecordType>(type), map.data + offset, size, offset})) return true;
      }
      offset += size;
      continue;
    }
    if (word == 0 && size >= sizeof(RecordHeader) && size % 8 == 0 && size <= kMaxRecordBytes &&
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
