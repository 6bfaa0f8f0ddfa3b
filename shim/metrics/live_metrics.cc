#include "metrics/live_metrics.h"

#include "comms/comms.h"
#include "gpu/gpu.h"
#include "process/process.h"
#include "trace/trace.h"

#include <ncclwatch_version.h>

#include <ncclwatch/metrics_text.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <new>
#include <string>

namespace ncclwatch {
namespace {

namespace m = metrics;

std::atomic<bool> g_started{false};
std::atomic<bool> g_final_written{false};
std::mutex g_write_mutex;  // the thread's writes and the final one use the same temporary file
constexpr size_t kShownPathBytes = 512;

// "%p" -> pid, "%h" -> host name, "%%" -> "%".
std::string expand_path(const std::string& pattern, const ProcessInfo& me) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    char key = pattern[++i];
    if (key == 'p') out += std::to_string(me.pid);
    else if (key == 'h') out += host_for_file_names(me.host);
    else if (key == '%') out += '%';
    else out += {'%', key};
  }
  return out;
}

// While the process runs, where each communicator's life is; at exit, its end state.
const char* live_state_name(CommPhase phase, bool exiting) {
  if (exiting) return lifecycle::end_state_name(end_state_at_exit(phase));
  switch (phase) {
    case CommPhase::kAlive: return "alive";
    case CommPhase::kFinalized: return "finalized";
    case CommPhase::kFinalizing: return "finalizing";
    case CommPhase::kDestroying: return "destroying";
    case CommPhase::kAborting: return "aborting";
    case CommPhase::kReleasedAtExit: return "released_at_exit";
  }
  return "unknown";
}

std::string metrics_text(bool exiting) {
  const ProcessInfo& me = process_info();
  std::string pid = std::to_string(me.pid);
  // Counted into fixed arrays under the registry's spin lock (nothing allocated while application
  // threads may wait for it), named after it is released.
  constexpr size_t kPhases = static_cast<size_t>(CommPhase::kReleasedAtExit) + 1;
  constexpr size_t kApis = 1024;
  std::array<uint64_t, kPhases> phase_counts{};
  std::array<uint64_t, kApis> api_counts{};
  ReleaseTally tally;
  registry().read(
      [&](const std::vector<CommEntry>& comms, const std::vector<ResourceEntry>& resources, const ReleaseTally& t) {
        for (const CommEntry& c : comms)
          if (static_cast<size_t>(c.phase) < kPhases) ++phase_counts[static_cast<size_t>(c.phase)];
        for (const ResourceEntry& r : resources)
          if (static_cast<size_t>(r.acquired_by) < kApis) ++api_counts[static_cast<size_t>(r.acquired_by)];
        tally = t;
      },
      true);
  std::map<std::string, uint64_t> states, held;
  for (size_t i = 0; i < kPhases; ++i)
    if (phase_counts[i]) states[live_state_name(static_cast<CommPhase>(i), exiting)] += phase_counts[i];
  for (size_t i = 0; i < kApis; ++i)
    if (api_counts[i]) held[trace::resource_kind(static_cast<trace::Api>(i))] += api_counts[i];
  if (tally.destroyed) states["destroyed"] += tally.destroyed;
  if (tally.aborted) states["aborted"] += tally.aborted;

  m::TextWriter out;
  static const std::string job_id = m::job_id_from_env([](const char* name) { return std::getenv(name); });
  out.set_job_id(job_id);
  out.family(m::kBuildInfo);
  out.sample({{"version", NCCLWATCH_VERSION}, {"trace_format", std::to_string(trace::kVersion)}}, 1);
  out.family(m::kCommunicators);
  for (const auto& [state, n] : states) out.sample({{"host", me.host}, {"pid", pid}, {"state", state}}, static_cast<double>(n));
  out.family(m::kCommunicatorsCreated);
  out.sample({{"host", me.host}, {"pid", pid}}, static_cast<double>(tally.created));
  out.family(m::kResourcesHeld);
  for (const auto& [kind, n] : held) out.sample({{"host", me.host}, {"pid", pid}, {"kind", kind}}, static_cast<double>(n));
  out.family(m::kLostRecords);
  out.sample({{"host", me.host}, {"pid", pid}}, static_cast<double>(lost_record_count()));

  struct Rank {
    uint64_t issued = 0, p2p = 0, completed = 0, alike_ns = 0, alike_launches = 0;
    uint32_t stalls = 0, unresolved = 0;
  };
  // Every communicator this process made: a counter stays when its communicator is released. One
  // series per (comm, rank): a communicator made twice with one identity adds up.
  std::map<std::pair<std::string, std::string>, Rank> ranks;
  for_each_comm_ever([&](const CommTrack& t) {
    char id[17];
    std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(t.id));
    Rank& r = ranks[{id, std::to_string(t.rank)}];
    r.issued += t.issued.load(std::memory_order_relaxed);
    r.p2p += t.p2p_issued();
    r.completed += t.completed.load(std::memory_order_relaxed);
    r.alike_ns += t.alike_gpu_ns.load(std::memory_order_relaxed);
    r.alike_launches += t.alike_launches.load(std::memory_order_relaxed);
    r.stalls += t.stalls.load(std::memory_order_relaxed);
    r.unresolved += t.unresolved_stalls.load(std::memory_order_relaxed);
  });
  auto each_rank = [&](const m::Family& family, auto value) {
    out.family(family);
    for (const auto& [key, r] : ranks) out.sample({{"comm", key.first}, {"rank", key.second}}, static_cast<double>(value(r)));
  };
  each_rank(m::kOpsIssued, [](const Rank& r) { return r.issued; });
  each_rank(m::kP2pIssued, [](const Rank& r) { return r.p2p; });
  // Completion and memory are known from the GPU only: without GPU timing the families are left out.
  if (detail::g_timing_mode.load(std::memory_order_relaxed) == static_cast<int>(TimingMode::kGpu)) {
    each_rank(m::kOpsCompleted, [](const Rank& r) { return r.completed; });
    // The alive communicators only, as last read; none in the file a process leaves at exit, whose
    // memory is gone with it.
    std::map<std::pair<std::string, std::string>, uint64_t> held;
    for_each_comm([&](const CommTrack& t) {
      if (uint64_t bytes = exiting ? 0 : t.held_bytes.load(std::memory_order_relaxed)) {
        char id[17];
        std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(t.id));
        held[{id, std::to_string(t.rank)}] += bytes;
      }
    });
    out.family(m::kCommunicatorMemory);
    uint64_t process_total = 0;
    for (const auto& [key, bytes] : held) {
      out.sample({{"comm", key.first}, {"rank", key.second}}, static_cast<double>(bytes));
      process_total += bytes;
    }
    out.family(m::kProcessMemory);
    if (!exiting) out.sample({{"host", me.host}, {"pid", pid}}, static_cast<double>(process_total));
    each_rank(m::kCollectiveGpuSeconds, [](const Rank& r) { return static_cast<double>(r.alike_ns) / 1e9; });
    each_rank(m::kCollectivesTimed, [](const Rank& r) { return r.alike_launches; });
  }
  each_rank(m::kStalls, [](const Rank& r) { return r.stalls; });
  each_rank(m::kStalled, [](const Rank& r) { return r.unresolved ? 1 : 0; });
  return out.text();
}

void write_metrics_file(bool exiting) {
  std::lock_guard lock(g_write_mutex);
  // A periodic write that waited while the final one ran must not replace it.
  if (!exiting && g_final_written.load(std::memory_order_relaxed)) return;
  const std::string path = expand_path(config().metrics_file, process_info());
  std::string why;
  switch (replace_file(path, metrics_text(exiting), why)) {
    case FileReplaced::kYes: return;
    case FileReplaced::kRefused: {
      std::string line = "ncclwatch: the metrics file " + printable(path, kShownPathBytes) + " is not written: " + why +
                         " (only a regular file of this user's is replaced); the job goes on without it";
      notice_once(Notice::kMetricsFileRefused, line.c_str());
      return;
    }
    case FileReplaced::kFailed: {
      std::string line = "ncclwatch: cannot write the metrics file " + printable(path, kShownPathBytes) + ": " + why +
                         "; the job goes on, its metrics are not updated";
      notice_once(Notice::kMetricsWriteFailed, line.c_str());
      return;
    }
  }
}

void sleep_seconds(double seconds) {
  timespec left{static_cast<time_t>(seconds), static_cast<long>((seconds - static_cast<double>(static_cast<time_t>(seconds))) * 1e9)};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

}  // namespace

void start_live_metrics() noexcept {
  if (config().metrics_file.empty() || g_started.load(std::memory_order_relaxed) ||
      g_started.exchange(true, std::memory_order_relaxed))
    return;
  try {
    start_background_thread("ncclwatch-live", [] {
      while (!g_final_written.load(std::memory_order_relaxed)) {
        try {
          write_metrics_file(false);
        } catch (...) {
          notice_once(Notice::kMetricsWriteFailed, "ncclwatch: the live metrics writer failed; its file is not updated");
          return;
        }
        sleep_seconds(config().metrics_sec);
      }
    });
  } catch (...) {
    notice_once(Notice::kMetricsWriteFailed, "ncclwatch: the live metrics writer could not start; no metrics file");
  }
}

void write_final_live_metrics() noexcept {
  if (!g_started.load(std::memory_order_relaxed) || g_final_written.exchange(true, std::memory_order_relaxed)) return;
  try {
    write_metrics_file(true);
  } catch (...) {
    notice_once(Notice::kMetricsWriteFailed,
                "ncclwatch: the final metrics could not be written; the metrics file keeps the values written before");
  }
}

void live_metrics_after_fork_in_child() noexcept {
  // The writer thread stays in the parent; the child starts its own at its first communicator.
  g_started.store(false, std::memory_order_relaxed);
  g_final_written.store(false, std::memory_order_relaxed);
  new (&g_write_mutex) std::mutex();
}

}  // namespace ncclwatch
