#include "gpu/progress_file.h"

#include "comms/comms.h"
#include "process/process.h"
#include "trace/trace.h"

#include <ncclwatch/trace_strings.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace ncclwatch {
namespace {

// Only the GPU-timing thread reads and writes these.
int64_t g_next_look_ns = 0;
std::string g_written;  // what the file holds now ("" before the first write)

bool watched() {
  static const std::string path = config().trace_dir + "/" + std::string(trace::progress_file::kWatchingFile);
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// "ncclwatch-progress 1\ncomm <id> <rank> <nranks> <issued>\n..." for every live communicator
// of more than one rank.
std::string progress_text() {
  std::string text(trace::progress_file::kHeader);
  text += '\n';
  char line[96];
  for_each_comm([&](const CommTrack& t) {
    if (t.id == 0 || t.nranks < 2) return;
    std::snprintf(line, sizeof(line), "comm %016llx %d %d %llu\n", static_cast<unsigned long long>(t.id), t.rank,
                  t.nranks, static_cast<unsigned long long>(t.issued.load(std::memory_order_relaxed)));
    text += line;
  });
  return text;
}

void write_atomically(const std::string& path, const std::string& text) {
  std::string partial = path + ".partial";
  int fd = open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  bool whole = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (whole && rename(partial.c_str(), path.c_str()) == 0) return;
  unlink(partial.c_str());
}

}  // namespace

void publish_progress_for_watchers() noexcept {
  try {
    int64_t now = monotonic_ns();
    if (g_next_look_ns && now < g_next_look_ns) return;
    g_next_look_ns = now + 1'000'000'000;
    const char* trace = trace_path_c();
    if (!*trace || !watched()) return;
    std::string text = progress_text();
    if (text == g_written) return;
    write_atomically(std::string(trace) + std::string(trace::progress_file::kSuffix), text);
    g_written = std::move(text);
  } catch (...) {
    notice_once(Notice::kProgressLost,
                "ncclwatch: an internal error while writing this process's progress for a watcher");
  }
}

}  // namespace ncclwatch
