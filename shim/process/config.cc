#include "process/config.h"

#include "process/text_limits.h"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace ncclwatch {
namespace {

// Settings come from users' scripts: a value that is not what we document is named once, with
// the value used instead, and never turned into something it does not say.
class SettingsParser {
 public:
  SettingsParser(const EnvLookup& lookup, std::vector<std::string>& problems) : lookup_(lookup), problems_(problems) {}

  // The raw value, or nullptr when unset or empty.
  const char* raw(const char* name) const {
    const char* value = lookup_(name);
    return value && *value ? value : nullptr;
  }

  // Every number is spelled one way: decimal digits, and for seconds a fraction after one point
  // ("5", "0.25"); no sign, space, exponent, hexadecimal or suffix.
  static bool plain_decimal(const char* text, bool fraction_allowed) {
    const char* p = text;
    while (*p >= '0' && *p <= '9') ++p;
    if (p == text) return false;
    if (*p == '.' && fraction_allowed) {
      const char* digits = ++p;
      while (*p >= '0' && *p <= '9') ++p;
      if (p == digits) return false;
    }
    return *p == '\0';
  }

  // A whole number in [min, max]; overflow refused.
  template <class T> void whole(const char* name, T& out, uint64_t min, uint64_t max) {
    const char* text = raw(name);
    if (!text) return;
    errno = 0;
    unsigned long long value = std::strtoull(text, nullptr, 10);
    if (!plain_decimal(text, false) || errno == ERANGE || value < min || value > max) {
      refuse(name, text, "a whole number from " + std::to_string(min) + " to " + std::to_string(max),
             std::to_string(out));
      return;
    }
    out = static_cast<T>(value);
  }

  // A finite number of seconds in [min, max].
  void seconds(const char* name, double& out, double min, double max) {
    const char* text = raw(name);
    if (!text) return;
    double value = plain_decimal(text, true) ? std::strtod(text, nullptr) : -1;
    if (!plain_decimal(text, true) || !std::isfinite(value) || value < min || value > max) {
      refuse(name, text, "seconds from " + trimmed(min) + " to " + trimmed(max), trimmed(out));
      return;
    }
    out = value;
  }

  // A spelling no longer taken, and what it gives instead (said as a refusal).
  struct Withdrawn {
    std::string_view spelling, instead;
  };

  // One of `choices` (exact spelling); returns its index, or -1 when unset or refused. A withdrawn
  // spelling is refused, naming what is used, and returns choices.size() + its index.
  int choice(const char* name, std::initializer_list<std::string_view> choices, std::string_view current,
             std::initializer_list<Withdrawn> withdrawn = {}) {
    const char* text = raw(name);
    if (!text) return -1;
    int index = 0;
    std::string spelled;
    for (std::string_view c : choices) {
      if (c == text) return index;
      if (index++) spelled += " or ";
      spelled += c;
    }
    for (const Withdrawn& w : withdrawn) {
      if (w.spelling == text) {
        refuse(name, text, spelled, std::string(w.instead));
        return index;
      }
      ++index;
    }
    refuse(name, text, spelled, std::string(current));
    return -1;
  }

  // Booleans are spelled one way: 1 or 0.
  void flag(const char* name, bool& out) {
    int picked = choice(name, {"0", "1"}, out ? "1" : "0");
    if (picked >= 0) out = picked == 1;
  }

 private:
  static std::string trimmed(double v) {
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }

  void refuse(const char* name, const char* text, const std::string& expected, const std::string& used) {
    // Escaped and cut: a value from a user's script must not drive the terminal or flood stderr.
    std::string shown = printable(text, kShownValueBytes);
    problems_.push_back(std::string("ncclwatch: ") + name + "=" + shown + " is not " + expected + "; using " + used);
  }

  static constexpr size_t kShownValueBytes = 64;

  const EnvLookup& lookup_;
  std::vector<std::string>& problems_;
};

}  // namespace

Config parse_settings(const EnvLookup& lookup, std::vector<std::string>& problems) {
  Config c;
  SettingsParser p(lookup, problems);
  if (const char* dir = p.raw("NCCLWATCH_DIR")) c.trace_dir = dir;
  switch (p.choice("NCCLWATCH_ON_LEAK", {"warn", "fail", "off"}, "warn")) {
    case 1: c.on_leak = LeakPolicy::kFail; break;
    case 2: c.on_leak = LeakPolicy::kOff; break;
    default: break;
  }
  uint64_t max_mb = c.max_trace_bytes >> 20;
  p.whole("NCCLWATCH_MAX_MB", max_mb, 1, kMaxTraceMegabytes);
  c.max_trace_bytes = max_mb << 20;
  p.whole("NCCLWATCH_FRAMES", c.frames, 0, kMaxFrames);
  bool disabled = false;
  p.flag("NCCLWATCH_DISABLE", disabled);
  c.record = !disabled;
  // "off" was withdrawn: every call's host enqueue times are recorded (two clock reads), so it
  // would promise what no mode does. Asked for, it is named and gives host timing, the least there is.
  switch (p.choice("NCCLWATCH_TIMING", {"gpu", "host"}, "the default", {{"off", "host (off is withdrawn: the host enqueue times of each call are always recorded)"}})) {
    case 0: c.timing = TimingRequest::kGpu; break;
    case 1: c.timing = TimingRequest::kHost; break;
    case 2: c.timing = TimingRequest::kHost; break;
    default: break;
  }
  p.whole("NCCLWATCH_SAMPLE", c.sample, 1, kMaxSample);
  p.seconds("NCCLWATCH_STALL_SEC", c.stall_sec, kMinStallSec, kMaxStallSec);
  p.flag("NCCLWATCH_GROUP_READABLE", c.group_readable);
  p.flag("NCCLWATCH_FULL_CMDLINE", c.full_cmdline);
  int profiler = p.choice("NCCLWATCH_PROFILER", {"0", "1", "kernels", "peers", "all"}, "0");
  if (profiler > 0) c.profiler = true;
  if (profiler == 2 || profiler == 4) c.profiler_kernels = true;
  if (profiler == 3 || profiler == 4) c.profiler_peers = true;
  if (const char* file = p.raw("NCCLWATCH_METRICS_FILE")) c.metrics_file = file;
  p.seconds("NCCLWATCH_METRICS_SEC", c.metrics_sec, kMinMetricsSec, kMaxMetricsSec);
  return c;
}

const Config& config() noexcept {
  // A function-local static: after the first call, one guard check (std::call_once costs more).
  static const Config* config = [] {
    std::vector<std::string> problems;
    auto* c = new Config(parse_settings([](const char* name) { return std::getenv(name); }, problems));
    c->problems = std::move(problems);
    return c;
  }();
  return *config;
}

void print_setting_problems() noexcept {
  for (const std::string& line : config().problems) {
    // write(2): the shim prints nothing through stdio, which the application owns.
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    ignored = ::write(STDERR_FILENO, "\n", 1);
    (void)ignored;
  }
}

}  // namespace ncclwatch
