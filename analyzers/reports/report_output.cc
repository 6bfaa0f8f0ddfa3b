// Where a report's text goes: standard output, or a file replaced in one step; the CSV the
// tabular reports write; bytes as people read them.
#include "reports/output.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

namespace ncclwatch::report {
namespace {

bool write_all(int fd, std::string_view text) {
  for (size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = ENOSPC;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Writes `text` to a new temporary file beside `path` and renames it over `path`. The temporary
// name carries 64 random bits besides the pid, and is created with O_EXCL | O_NOFOLLOW: in a folder
// others can write, a link or FIFO planted under a name they could guess (the pid is no secret) is
// never opened, and no file of anyone's is clobbered. `why` says what failed.
bool replace_through_temporary(const std::string& path, std::string_view text, mode_t mode, std::string& why) {
  static std::mt19937_64 random_bits{std::random_device{}()};
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; ++attempt) {
    temporary = fmt::format("{}.tmp.{}.{:016x}", path, getpid(), random_bits());
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    why = fmt::format("cannot create a temporary file beside it: {}", std::strerror(errno));
    return false;
  }
  bool ok = write_all(fd, text);
  int error = errno;
  ok = ::close(fd) == 0 && ok;
  if (!ok) error = errno ? errno : error;
  if (ok && ::rename(temporary.c_str(), path.c_str()) != 0) ok = false, error = errno;
  if (!ok) {
    ::unlink(temporary.c_str());  // the file this call made, by the name it made it under
    why = std::strerror(error);
  }
  return ok;
}

}  // namespace

void write_json_streamed(std::ostream& out, nlohmann::json head, const std::vector<StreamedArray>& arrays) {
  // Each non-empty array stands in the head as [0]; dump_json(…, 2) writes a key of the top level
  // on a line of its own, indented by 2, so each stand-in is found by its key, and replaced by the
  // entries, each indented one level deeper (4) as the whole object's dump would.
  std::vector<std::pair<std::string, const StreamedArray*>> markers;
  for (const StreamedArray& a : arrays) {
    head[a.key] = a.size ? nlohmann::json::array({0}) : nlohmann::json::array();
    if (a.size) markers.emplace_back("\n  " + dump_json(a.key) + ": [\n    0\n  ]", &a);
  }
  std::string text = dump_json(head, 2);
  std::vector<std::pair<size_t, size_t>> at;  // (where its marker is in text, index in markers)
  for (size_t m = 0; m < markers.size(); ++m) at.emplace_back(text.find(markers[m].first), m);
  std::sort(at.begin(), at.end());
  size_t written = 0;
  for (const auto& [where, m] : at) {
    const auto& [marker, array] = markers[m];
    std::string_view before(text.data() + written, where - written);
    out << before << "\n  " << dump_json(array->key) << ": [";
    std::string indented;
    for (size_t i = 0; i < array->size; ++i) {
      std::string entry = dump_json(array->entry(i), 2);
      indented.assign(i ? ",\n    " : "\n    ");
      for (char c : entry) {  // a raw newline in a dump only ever separates lines (strings escape theirs)
        indented += c;
        if (c == '\n') indented += "    ";
      }
      out << indented;
    }
    out << "\n  ]";
    written = where + marker.size();
  }
  out << std::string_view(text.data() + written, text.size() - written);
}

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string quoted = "\"";
  for (char ch : text) {
    if (ch == '"') quoted += '"';
    quoted += ch;
  }
  return quoted + '"';
}

void write_csv_row(const std::vector<std::string>& fields) {
  std::vector<std::string> quoted;
  quoted.reserve(fields.size());
  for (const std::string& f : fields) quoted.push_back(csv_field(f));
  fmt::print("{}\n", fmt::join(quoted, ","));
}

std::string bytes_text(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024 && u + 1 < std::size(units)) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.{}f} {}", v, v == std::floor(v) ? 0 : 1, units[u]);
}

bool write_output_atomically(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    bool ok = std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
    if (!ok) say("writing to standard output failed");
    return ok;
  }
  // A path that exists and is not a regular file (/dev/stdout, a pipe) is written as it is: a
  // rename would replace the device or link itself.
  std::error_code ec;
  auto status = std::filesystem::symlink_status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    ok = f && std::fclose(f) == 0 && ok;
    if (!ok) say("cannot write {}", path);
    return ok;
  }
  // A reader (node-exporter's textfile collector, a browser) never sees a half-written file: the
  // text goes to a temporary file beside it, renamed over it once complete.
  std::string why;
  if (!replace_through_temporary(path, text, 0666, why)) {  // 0666: as fopen() would, less the umask
    say("cannot write {}: {}", path, why);
    return false;
  }
  return true;
}

std::string why_not_replaced_in_shared_folder(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? "" : std::strerror(errno);
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (S_ISFIFO(st.st_mode)) return "it is a FIFO";
  if (S_ISDIR(st.st_mode)) return "it is a directory";
  if (!S_ISREG(st.st_mode)) return "it is not a regular file";
  if (st.st_uid != ::geteuid()) return fmt::format("it is owned by uid {}, not by this user (uid {})", st.st_uid, ::geteuid());
  return "";
}

bool write_shared_folder_file(const std::string& path, std::string_view text, mode_t mode, std::string& why) {
  // Checked just before the rename, which replaces the entry itself and never what a link names:
  // whoever swaps the entry in between can only have their own entry replaced.
  why = why_not_replaced_in_shared_folder(path);
  return why.empty() && replace_through_temporary(path, text, mode, why);
}

}  // namespace ncclwatch::report
