#include "process/process_info.h"

#include "process/clock.h"
#include "process/config.h"
#include "process/text_limits.h"

#include <ncclwatch/trace_strings.h>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>

extern char** environ;

namespace ncclwatch {
namespace {

std::mutex g_mutex;
// Published once complete: signal handlers read it without the lock, which the thread they
// interrupted may hold while collecting.
std::atomic<const ProcessInfo*> g_info{nullptr};

// Variables worth keeping: NCCL's own settings and the ids that say which job and rank this is.
bool is_interesting_variable(const char* entry) {
  static constexpr const char* kPrefixes[] = {"NCCL_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_", "NCCLWATCH_", "SLURM_JOB",
                                              "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "OMPI_COMM_WORLD_",
                                              "PMI_RANK", "PMI_SIZE", "RANK=", "LOCAL_RANK=", "WORLD_SIZE=",
                                              "LOCAL_WORLD_SIZE=", "GROUP_RANK=", "MASTER_ADDR=", "MASTER_PORT=",
                                              "TORCHELASTIC_RUN_ID=", "CUDA_VISIBLE_DEVICES=", "LD_PRELOAD="};
  for (const char* prefix : kPrefixes)
    if (std::strncmp(entry, prefix, std::strlen(prefix)) == 0) return true;
  return false;
}

std::string read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

ProcessInfo collect() {
  ProcessInfo info;
  info.pid = getpid();
  info.ppid = getppid();
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  info.host = host[0] ? host : "unknown-host";
  info.start_wall_ns = wall_ns();
  info.start_mono_ns = monotonic_ns();
  for (const char* name : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    if (const char* value = std::getenv(name)) {
      info.job_rank = value;
      break;
    }
  }
  return info;
}

}  // namespace

std::string ProcessInfo::as_strings() const {
  std::string out;
  using namespace trace::process_record;
  using trace::append_string;
  append_string(out, kHost, host);
  append_string(out, kPid, std::to_string(pid));
  append_string(out, kPpid, std::to_string(ppid));
  char exe[4096] = {};
  if (readlink("/proc/self/exe", exe, sizeof(exe) - 1) > 0) append_string(out, kExe, exe);
  std::vector<std::string> args;
  std::string raw = read_file("/proc/self/cmdline");
  for (size_t at = 0; at < raw.size();) {
    size_t end = raw.find('\0', at);
    if (end == std::string::npos) end = raw.size();
    args.emplace_back(raw, at, end - at);
    at = end + 1;
  }
  // A trace is shared more widely than the job's secrets should be (README, "What a trace holds").
  if (!config().full_cmdline) mask_secret_arguments(args);
  std::string cmdline;
  for (const std::string& arg : args) {
    if (!cmdline.empty()) cmdline += ' ';
    cmdline += arg;
  }
  append_string(out, kCmdline, capped_value(cmdline));
  // Each value is capped; so is their sum, far below what one trace record holds.
  constexpr size_t kMaxEnvironmentBytes = 256 << 10;
  size_t left_out = 0;
  for (char** env = environ; env && *env; ++env) {
    if (!is_interesting_variable(*env)) continue;
    std::string entry = masked_environment_entry(*env);  // masked whatever NCCLWATCH_FULL_CMDLINE says
    if (out.size() + entry.size() > kMaxEnvironmentBytes) {
      ++left_out;
      continue;
    }
    out += kEnvPrefix;
    out += entry;
    out += '\0';
  }
  if (left_out) append_string(out, kEnvLeftOut, std::to_string(left_out) + " variables (over " +
                                                     std::to_string(kMaxEnvironmentBytes >> 10) + " KiB in all)");
  return out;
}

std::string host_for_file_names(std::string_view host) {
  std::string out;
  for (char ch : host.substr(0, 64)) {
    bool safe = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                ch == '_' || ch == '-';
    out += safe ? ch : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "unknown-host";
  return out;
}

const ProcessInfo& process_info() {
  // Acquire pairs with the release below: the object is complete.
  if (const ProcessInfo* info = g_info.load(std::memory_order_acquire)) return *info;
  std::lock_guard lock(g_mutex);
  const ProcessInfo* info = g_info.load(std::memory_order_relaxed);
  if (!info) {
    info = new ProcessInfo(collect());
    g_info.store(info, std::memory_order_release);
  }
  return *info;
}

const ProcessInfo* process_info_if_collected() noexcept { return g_info.load(std::memory_order_acquire); }

void process_info_after_fork_in_child() noexcept {
  new (&g_mutex) std::mutex();
  g_info.store(nullptr, std::memory_order_relaxed);  // the parent's copy leaks in the child: one small object
}

}  // namespace ncclwatch
