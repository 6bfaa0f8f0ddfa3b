// The shim's settings, read from the environment once, at the first NCCL call.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ncclwatch {

enum class LeakPolicy { kWarn, kFail, kOff };
// NCCLWATCH_TIMING as asked; the GPU timer decides what it can do (TimingMode, gpu_timer.h).
enum class TimingRequest { kDefault, kGpu, kHost };  // kDefault: the GPU where a driver is usable

struct Config {
  std::string trace_dir = "ncclwatch";   // NCCLWATCH_DIR
  LeakPolicy on_leak = LeakPolicy::kWarn; // NCCLWATCH_ON_LEAK=warn|fail|off
  uint64_t max_trace_bytes = 1ull << 30;  // NCCLWATCH_MAX_MB
  int frames = 24;                        // NCCLWATCH_FRAMES: call-site depth captured at creation
  bool record = true;                     // NCCLWATCH_DISABLE=1 turns the shim into a pure forwarder
  TimingRequest timing = TimingRequest::kDefault;  // NCCLWATCH_TIMING=gpu|host
  // NCCLWATCH_SAMPLE=N: GPU timestamps for the first 16 launches of each op shape on a comm, then
  // one in N, and at least one per stream each millisecond (gpu_timer.cc). A timestamped launch
  // costs three driver calls (capture check, two event records): 32 keeps timestamps under 0.1
  // driver calls per collective in a tight loop.
  uint32_t sample = 32;
  double stall_sec = 60;                  // NCCLWATCH_STALL_SEC: the watchdog's threshold
  bool group_readable = false;            // NCCLWATCH_GROUP_READABLE=1: trace files 0640, else 0600
  bool full_cmdline = false;              // NCCLWATCH_FULL_CMDLINE=1: keep secret-looking arguments
  // NCCLWATCH_PROFILER=1: the shim is NCCL's profiler plugin too (NCCL >= 2.28), recording what NCCL
  // planned for each op (profiler/); =kernels: and each op's kernel channels by the GPU's timer
  // (NCCL then adds a proxy op to every launch). Off by default until its cost is measured at the floor.
  bool profiler = false;
  bool profiler_kernels = false;
  bool profiler_peers = false;  // =peers: and what NCCL's proxy moved to and from each peer; =all: both
  // NCCLWATCH_METRICS_FILE: Prometheus text rewritten every NCCLWATCH_METRICS_SEC while the
  // process runs ("%p": the pid, "%h": the host name); "" writes none.
  std::string metrics_file;
  double metrics_sec = 15;
  std::vector<std::string> problems;      // one line per refused setting, as printed
};

// Ranges of the numeric settings. The stall threshold stays far below what int64 nanoseconds hold.
inline constexpr uint64_t kMaxTraceMegabytes = 1ull << 20;  // 1 TiB
inline constexpr uint64_t kMaxFrames = 64;
inline constexpr uint64_t kMaxSample = 1ull << 20;
inline constexpr double kMinStallSec = 0.01;
inline constexpr double kMaxStallSec = 30.0 * 24 * 3600;  // 30 days
inline constexpr double kMinMetricsSec = 0.1;
inline constexpr double kMaxMetricsSec = 24.0 * 3600;

// Reads every setting through `lookup` (getenv in the shim, a table in tests); each refused value
// adds one line to `problems`, saying what was expected and what is used instead.
using EnvLookup = std::function<const char*(const char*)>;
Config parse_settings(const EnvLookup& lookup, std::vector<std::string>& problems);

// Exit status of a leaky exit under NCCLWATCH_ON_LEAK=fail (EX_SOFTWARE).
inline constexpr int kLeakExitStatus = 70;

const Config& config() noexcept;

// Names each refused setting on stderr: at a process's first NCCL call, so processes that never
// call NCCL (a launcher that merely looks NCCL up) print nothing.
void print_setting_problems() noexcept;

}  // namespace ncclwatch
