// The shim's settings, read from the environment once, at the first NCCL call.
#pragma once

#include <cstdint>
#include <string>

namespace ncclwatch {

enum class LeakPolicy { kWarn, kFail, kOff };

struct Config {
  std::string trace_dir = "ncclwatch";   // NCCLWATCH_DIR
  LeakPolicy on_leak = LeakPolicy::kWarn; // NCCLWATCH_ON_LEAK=warn|fail|off
  uint64_t max_trace_bytes = 1ull << 30;  // NCCLWATCH_MAX_MB
  int frames = 24;                        // NCCLWATCH_FRAMES: call-site depth captured at creation
  bool record = true;                     // NCCLWATCH_DISABLE=1 turns the shim into a pure forwarder
  std::string timing = "";                // NCCLWATCH_TIMING=gpu|host|off ("" = gpu where usable)
  // NCCLWATCH_SAMPLE=N: GPU timestamps for one launch in N (every launch still gets a completion
  // event for the watchdog). Timestamped events cost ~1% of a large all-reduce's GPU time on H200
  // (measured with nccl-tests), completion-only events nothing measurable: 8 keeps the cost < 0.2%.
  uint32_t sample = 8;
  double stall_sec = 60;                  // NCCLWATCH_STALL_SEC: the watchdog's threshold
};

// Exit status of a leaky exit under NCCLWATCH_ON_LEAK=fail (EX_SOFTWARE).
inline constexpr int kLeakExitStatus = 70;

const Config& config() noexcept;

}  // namespace ncclwatch
