#include "config.h"

#include "notices.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ncclwatch {
namespace {

Config read_environment() {
  Config c;
  if (const char* dir = std::getenv("NCCLWATCH_DIR"); dir && *dir) c.trace_dir = dir;
  if (const char* policy = std::getenv("NCCLWATCH_ON_LEAK"); policy && *policy) {
    if (std::strcmp(policy, "fail") == 0) c.on_leak = LeakPolicy::kFail;
    else if (std::strcmp(policy, "off") == 0) c.on_leak = LeakPolicy::kOff;
    else c.on_leak = LeakPolicy::kWarn;
  }
  if (const char* mb = std::getenv("NCCLWATCH_MAX_MB"); mb && *mb) {
    long long value = std::atoll(mb);
    if (value > 0) c.max_trace_bytes = static_cast<uint64_t>(value) << 20;
  }
  if (const char* frames = std::getenv("NCCLWATCH_FRAMES"); frames && *frames) {
    int value = std::atoi(frames);
    if (value >= 0 && value <= 64) c.frames = value;
  }
  if (const char* off = std::getenv("NCCLWATCH_DISABLE"); off && *off && std::strcmp(off, "0") != 0) c.record = false;
  if (const char* timing = std::getenv("NCCLWATCH_TIMING"); timing && *timing) c.timing = timing;
  if (const char* sample = std::getenv("NCCLWATCH_SAMPLE"); sample && *sample) {
    long value = std::atol(sample);
    if (value >= 1) c.sample = static_cast<uint32_t>(value);
  }
  if (const char* stall = std::getenv("NCCLWATCH_STALL_SEC"); stall && *stall) {
    double value = std::atof(stall);
    if (value > 0) c.stall_sec = value;
  }
  return c;
}

}  // namespace

const Config& config() noexcept {
  // A function-local static: after the first call, one guard check (std::call_once costs more).
  static const Config* config = new Config(read_environment());
  return *config;
}


}  // namespace ncclwatch
