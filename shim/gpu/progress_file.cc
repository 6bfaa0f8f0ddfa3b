#include "gpu/progress_file.h"

#include "comms/comms.h"
#include "process/process.h"
#include "trace/trace.h"

#include <ncclwatch/trace_strings.h>

#include <sys/stat.h>

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
    std::string why;
    if (replace_file(std::string(trace) + std::string(trace::progress_file::kSuffix), text, why, mode_beside_trace()) != FileReplaced::kYes) {
      notice_once(Notice::kProgressLost, ("ncclwatch: the progress file for a watcher is not written: " + why).c_str());
      return;
    }
    g_written = std::move(text);
  } catch (...) {
    notice_once(Notice::kProgressLost,
                "ncclwatch: an internal error while writing this process's progress for a watcher");
  }
}

}  // namespace ncclwatch
