#include "gpu/gpu_watchdog.h"

#include "process/process.h"
#include "site/site.h"
#include "trace/trace.h"

#include <ncclwatch/trace_strings.h>

#include <fcntl.h>
#include <unistd.h>

#include <string>

#include <cstdio>
#include <cstring>
#include <vector>

namespace ncclwatch::gpu {
namespace {

void write_stall_record(const LaunchName& first, trace::StallState state) {
  std::vector<trace::StallComm> comms;
  for_each_comm([&](const CommTrack& t) {
    comms.push_back({t.id, t.issued.load(std::memory_order_relaxed), t.completed.load(std::memory_order_relaxed), t.rank,
                     t.nranks});
  });
  uint32_t size = trace::padded_size(sizeof(trace::StallRecord) + comms.size() * sizeof(trace::StallComm));
  if (size > trace::kMaxRecordBytes) return;
  RecordSlot slot = reserve_record(size);
  if (!slot) return;
  auto* rec = slot.as<trace::StallRecord>();
  rec->time_ns = monotonic_ns();
  rec->launch_id = first.launch_id;
  rec->comm_id = first.track ? first.track->id : 0;
  rec->seq = first.seq;
  rec->enqueued_ns = first.enqueued_ns;
  rec->api = first.api;
  rec->state = static_cast<uint32_t>(state);
  rec->ncomms = static_cast<uint32_t>(comms.size());
  std::memcpy(slot.bytes() + sizeof(trace::StallRecord), comms.data(), comms.size() * sizeof(trace::StallComm));
  slot.commit(trace::RecordType::kStall);
}

// Beside the trace, `<trace>.stalled` exists while this process has a stall unresolved, holding the
// stall's line: a watcher of the folder (ncclwatch-report watch) learns of a hang from a directory
// listing, without reading the traces.
void mark_stalled(const char* line) {
  const char* trace = trace_path_c();
  if (!*trace) return;
  std::string why;  // a marker that cannot be written leaves the watchers to the trace
  replace_file(std::string(trace) + std::string(trace::progress_file::kStalledSuffix), line, why, mode_beside_trace());
}

void unmark_stalled() {
  uint32_t open_stalls = 0;
  for_each_comm([&](const CommTrack& t) { open_stalls += t.unresolved_stalls.load(std::memory_order_relaxed); });
  if (const char* trace = trace_path_c(); *trace && open_stalls == 0) unlink((std::string(trace) + std::string(trace::progress_file::kStalledSuffix)).c_str());
}

void print_stall_line(const LaunchName& first, uint64_t stream, size_t unconfirmed) {
  char which[128] = "";
  if (unconfirmed > 1)
    std::snprintf(which, sizeof(which), "; the first of %zu launches since the last one seen complete", unconfirmed);
  char replay[96] = "";
  if (first.graph)
    std::snprintf(replay, sizeof(replay), "a replay of CUDA graph %u (%u NCCL op(s)), up to ", first.graph,
                  first.graph_ops);
  char line[736];
  std::snprintf(line, sizeof(line),
                "ncclwatch: %s%s seq %llu on comm %016llx (rank %d/%d) has not completed after %.0f s "
                "(stream 0x%llx%s); pending ops of every communicator written to %s\n",
                replay, trace::api_name(static_cast<trace::Api>(first.api)), static_cast<unsigned long long>(first.seq),
                static_cast<unsigned long long>(first.track ? first.track->id : 0), first.track ? first.track->rank : -1,
                first.track ? first.track->nranks : -1, (monotonic_ns() - first.enqueued_ns) / 1e9,
                static_cast<unsigned long long>(stream), which, trace_path_c());
  ssize_t ignored = ::write(STDERR_FILENO, line, std::strlen(line));
  (void)ignored;
  mark_stalled(line);
}

}  // namespace

void report_stall(const LaunchName& first, uint64_t stream, trace::StallState state, size_t unconfirmed,
                  pid_t issuer_tid) noexcept {
  try {
    if (CommTrack* track = first.track; track && state == trace::StallState::kStalled) {
      track->stalls.fetch_add(1, std::memory_order_relaxed);
      track->unresolved_stalls.fetch_add(1, std::memory_order_relaxed);
    } else if (track) {
      uint32_t open = track->unresolved_stalls.load(std::memory_order_relaxed);
      while (open && !track->unresolved_stalls.compare_exchange_weak(open, open - 1, std::memory_order_relaxed)) {
      }
    }
    write_stall_record(first, state);
    if (state == trace::StallState::kStalled) {
      print_stall_line(first, stream, unconfirmed);
      write_stacks(trace::stacks_record::kStall, issuer_tid);
    } else {
      unmark_stalled();
    }
  } catch (...) {
    notice_once(Notice::kStallReportFailed,
                "ncclwatch: an internal error stopped a stall report; a stalled op may be missing from stderr and "
                "the trace");
  }
}

}  // namespace ncclwatch::gpu

namespace ncclwatch {

void clear_watcher_files() noexcept {
  const char* trace = trace_path_c();
  char path[4096 + 16];
  size_t n = std::strlen(trace);
  if (n == 0 || n + 16 > sizeof(path)) return;
  std::memcpy(path, trace, n);
  for (std::string_view suffix : {trace::progress_file::kStalledSuffix, trace::progress_file::kSuffix}) {
    std::memcpy(path + n, suffix.data(), suffix.size());
    path[n + suffix.size()] = '\0';
    unlink(path);
  }
}

}  // namespace ncclwatch
