// Where a report's text goes: standard output, or a file replaced in one step.
#include "reports.h"

#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace ncclwatch::report {

bool write_output_atomically(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    bool ok = std::fwrite(text.data(), 1, text.size(), stdout) == text.size() && std::fflush(stdout) == 0;
    if (!ok) std::fprintf(stderr, "ncclwatch-report: writing to standard output failed\n");
    return ok;
  }
  // A reader (node-exporter's textfile collector, a browser) never sees a half-written file: the
  // text goes to a temporary file beside it, renamed over it once complete.
  std::string temporary = path + ".tmp." + std::to_string(getpid());
  std::FILE* f = std::fopen(temporary.c_str(), "w");
  bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = f && std::fclose(f) == 0 && ok;
  std::error_code ec;
  if (ok) std::filesystem::rename(temporary, path, ec);
  if (!ok || ec) {
    std::filesystem::remove(temporary, ec);
    std::fprintf(stderr, "ncclwatch-report: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace ncclwatch::report
