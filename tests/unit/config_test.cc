// Every NCCLWATCH_* setting through the one parser: accepted values, and refused ones named once
// with the value used instead.
#include "process/config.h"
#include "process/text_limits.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

using namespace ncclwatch;

namespace {

struct Parsed {
  Config config;
  std::vector<std::string> problems;
};

Parsed parse(std::map<std::string, std::string> env) {
  Parsed p;
  p.config = parse_settings(
      [&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      p.problems);
  return p;
}

}  // namespace

TEST_CASE("defaults when nothing is set") {
  Parsed p = parse({});
  CHECK(p.problems.empty());
  CHECK(p.config.sample == 32);
  CHECK(p.config.stall_sec == 60);
  CHECK(p.config.frames == 24);
  CHECK(p.config.max_trace_bytes == (1ull << 30));
  CHECK(p.config.record);
  CHECK(p.config.on_leak == LeakPolicy::kWarn);
  CHECK(p.config.timing == TimingRequest::kDefault);
  CHECK_FALSE(p.config.group_readable);
}

TEST_CASE("good values are taken") {
  Parsed p = parse({{"NCCLWATCH_SAMPLE", "1"}, {"NCCLWATCH_STALL_SEC", "2.5"}, {"NCCLWATCH_FRAMES", "0"},
                    {"NCCLWATCH_MAX_MB", "3"}, {"NCCLWATCH_DISABLE", "1"}, {"NCCLWATCH_ON_LEAK", "fail"},
                    {"NCCLWATCH_TIMING", "host"}, {"NCCLWATCH_GROUP_READABLE", "1"}, {"NCCLWATCH_DIR", "t"}});
  CHECK(p.problems.empty());
  CHECK(p.config.sample == 1);
  CHECK(p.config.stall_sec == 2.5);
  CHECK(p.config.frames == 0);
  CHECK(p.config.max_trace_bytes == 3ull << 20);
  CHECK_FALSE(p.config.record);
  CHECK(p.config.on_leak == LeakPolicy::kFail);
  CHECK(p.config.timing == TimingRequest::kHost);
  CHECK(p.config.group_readable);
  CHECK(p.config.trace_dir == "t");
  CHECK(parse({{"NCCLWATCH_ON_LEAK", "off"}}).config.on_leak == LeakPolicy::kOff);
  CHECK(parse({{"NCCLWATCH_TIMING", "gpu"}}).config.timing == TimingRequest::kGpu);
  CHECK(parse({{"NCCLWATCH_DISABLE", "0"}}).config.record);
}

TEST_CASE("bad values are named once and the default is kept") {
  struct Case {
    const char* name;
    const char* value;
  };
  const Case cases[] = {
      {"NCCLWATCH_SAMPLE", "4294967296"},  // was truncated to 0, then SIGFPE in `% sample`
      {"NCCLWATCH_SAMPLE", "0"},
      {"NCCLWATCH_SAMPLE", "-8"},
      {"NCCLWATCH_SAMPLE", "8x"},
      {"NCCLWATCH_SAMPLE", "99999999999999999999999"},
      {"NCCLWATCH_STALL_SEC", "inf"},      // overflowed int64 nanoseconds: every op a stall
      {"NCCLWATCH_STALL_SEC", "1e12"},
      {"NCCLWATCH_STALL_SEC", "nan"},
      {"NCCLWATCH_STALL_SEC", "0"},
      {"NCCLWATCH_STALL_SEC", "abc"},
      {"NCCLWATCH_FRAMES", "abc"},         // was 0 frames
      {"NCCLWATCH_FRAMES", "65"},
      {"NCCLWATCH_MAX_MB", "-1"},
      {"NCCLWATCH_MAX_MB", "0"},
      {"NCCLWATCH_MAX_MB", "18446744073709551615"},
      {"NCCLWATCH_ON_LEAK", "abc"},
      {"NCCLWATCH_ON_LEAK", "FAIL"},
      {"NCCLWATCH_TIMING", "abc"},
      {"NCCLWATCH_DISABLE", "false"},      // each of these used to disable the shim
      {"NCCLWATCH_DISABLE", "no"},
      {"NCCLWATCH_DISABLE", "off"},
      {"NCCLWATCH_GROUP_READABLE", "yes"},
      // Every numeric setting by one rule: the forms strtod or strtoull would take beyond plain decimals.
      {"NCCLWATCH_STALL_SEC", " 5"},
      {"NCCLWATCH_STALL_SEC", "0x10"},
      {"NCCLWATCH_STALL_SEC", "0x1p4"},
      {"NCCLWATCH_STALL_SEC", "+5"},
      {"NCCLWATCH_STALL_SEC", "5."},
      {"NCCLWATCH_STALL_SEC", "5e1"},
      {"NCCLWATCH_METRICS_SEC", " 1"},
      {"NCCLWATCH_METRICS_SEC", "0x1p4"},
      {"NCCLWATCH_SAMPLE", " 5"},
      {"NCCLWATCH_SAMPLE", "0x10"},
      {"NCCLWATCH_SAMPLE", "5.0"},
      {"NCCLWATCH_MAX_MB", "+5"},
  };
  const Config defaults;
  for (const Case& c : cases) {
    INFO(c.name << "=" << c.value);
    Parsed p = parse({{c.name, c.value}});
    REQUIRE(p.problems.size() == 1);
    CHECK(p.problems[0].find(std::string(c.name) + "=" + c.value) != std::string::npos);
    CHECK(p.problems[0].find("using ") != std::string::npos);
    CHECK(p.config.sample == defaults.sample);
    CHECK(p.config.stall_sec == defaults.stall_sec);
    CHECK(p.config.frames == defaults.frames);
    CHECK(p.config.max_trace_bytes == defaults.max_trace_bytes);
    CHECK(p.config.on_leak == defaults.on_leak);
    CHECK(p.config.timing == defaults.timing);
    CHECK(p.config.record);
    CHECK_FALSE(p.config.group_readable);
  }
}

TEST_CASE("seconds take a decimal fraction, whole numbers do not") {
  Parsed p = parse({{"NCCLWATCH_STALL_SEC", "0.25"}, {"NCCLWATCH_METRICS_SEC", "2"}});
  CHECK(p.problems.empty());
  CHECK(p.config.stall_sec == 0.25);
  CHECK(p.config.metrics_sec == 2);
}

TEST_CASE("NCCLWATCH_TIMING=off is withdrawn: named, and host timing is used") {
  Parsed p = parse({{"NCCLWATCH_TIMING", "off"}});
  REQUIRE(p.problems.size() == 1);
  CHECK(p.problems[0].find("NCCLWATCH_TIMING=off") != std::string::npos);
  CHECK(p.problems[0].find("using host") != std::string::npos);
  CHECK(p.config.timing == TimingRequest::kHost);
}

TEST_CASE("the stall threshold in nanoseconds fits int64 at the largest accepted value") {
  Parsed p = parse({{"NCCLWATCH_STALL_SEC", "2592000"}});
  CHECK(p.problems.empty());
  CHECK(p.config.stall_sec * 1e9 < 9.2e18);
}

TEST_CASE("cuts never split a UTF-8 character") {
  std::string name = "ab\xc3\xa9";  // "abé": é is two bytes
  CHECK(utf8_prefix_length(name, 3) == 2);
  CHECK(utf8_prefix_length(name, 4) == 4);
  CHECK(utf8_prefix_length("\xe2\x82\xac\xe2\x82\xac", 5) == 3);  // "€€"
  CHECK(utf8_prefix_length("plain", 3) == 3);
}

TEST_CASE("secret-looking arguments are masked") {
  std::vector<std::string> args = {"train.py", "--api-key=abc123", "--hf_token", "xyz", "--lr", "0.1",
                                   "--PASSWORD=p", "--secret-file", "--other"};
  mask_secret_arguments(args);
  CHECK(args == std::vector<std::string>{"train.py", "--api-key=***", "--hf_token", "***", "--lr", "0.1",
                                         "--PASSWORD=***", "--secret-file", "--other"});
}
