// Where a report's text goes: standard output, or a file replaced in one step; the CSV the
// tabular reports write; bytes as people read them.
#include "reports.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace ncclwatch::report {

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string quoted = "\"";
  for (char ch : text) {
    if (ch == '"') quoted += '"';
    quoted += ch;
  }
  return quoted + '"';
}

std::string csv_cell(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) return fmt::format("{:.3f}", value.get<double>());
  if (value.is_null()) return {};
  return dump_json(value);
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
    if (!ok) std::fprintf(stderr, "ncclwatch-report: writing to standard output failed\n");
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
    if (!ok) std::fprintf(stderr, "ncclwatch-report: cannot write %s\n", path.c_str());
    return ok;
  }
  // A reader (node-exporter's textfile collector, a browser) never sees a half-written file: the
  // text goes to a temporary file beside it, renamed over it once complete.
  std::string temporary = path + ".tmp." + std::to_string(getpid());
  std::FILE* f = std::fopen(temporary.c_str(), "w");
  bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = f && std::fclose(f) == 0 && ok;
  if (ok) std::filesystem::rename(temporary, path, ec);
  if (!ok || ec) {
    std::filesystem::remove(temporary, ec);
    std::fprintf(stderr, "ncclwatch-report: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace ncclwatch::report
