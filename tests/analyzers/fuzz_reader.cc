// libFuzzer target: any bytes as a trace file through every report ncclwatch-report has: dump,
// leaks (text, CSV and JSON, symbolizing the call sites of the file's own module records),
// summary, hang, latency (text, CSV and JSON), timeline (plain and gzip), html and metrics. Nothing
// may crash, hang, read out of bounds, overflow a signed integer or grow memory past what the file
// justifies (run_fuzz.sh sets the limits). Pages of zeros are written as holes, as a copy that made
// a trace sparse leaves them, so that the reader's stepping over holes is fuzzed too.
#include "model/op_model.h"
#include "reports/reports.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace ncclwatch::report;

namespace {

// Where each input is written for the reports to read (they take file names).
const std::string& input_path() {
  static const std::string path = [] {
    const char* tmp = std::getenv("TMPDIR");
    return std::string(tmp && *tmp ? tmp : "/tmp") + "/ncclwatch-fuzz-" + std::to_string(getpid()) + ".nwt";
  }();
  return path;
}

}  // namespace

// The reports print; the fuzzer's own messages go to stderr, which run_fuzz.sh closes for the
// target (-close_fd_mask=2). stdout goes to /dev/null rather than closed: a failed write would
// make fmt::print throw.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (!std::freopen("/dev/null", "w", stdout)) std::abort();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = input_path();
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  constexpr size_t kPage = 4096;
  for (size_t at = 0; at < size; at += kPage) {
    size_t n = std::min(kPage, size - at);
    bool zeros = n == kPage && std::all_of(data + at, data + at + n, [](uint8_t b) { return b == 0; });
    if (!zeros && pwrite(fd, data + at, n, static_cast<off_t>(at)) != static_cast<ssize_t>(n)) std::abort();
  }
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) std::abort();
  close(fd);

  Options options;
  options.inputs = {path};
  run_dump(path, options);
  Job job = load_job(options.inputs);
  run_leaks(job, options);  // text; symbolizes
  run_summary(options);
  run_hang(options);
  run_latency(options);
  IdleSettings every_one_idle{0, 0};  // every communicator with a figure is named idle: every line runs
  run_memory(options, every_one_idle);
  options.csv = true;
  run_memory(options, every_one_idle);
  run_latency(options);
  run_leaks(job, options);
  run_hang(options);
  options.csv = false;
  options.json = true;
  run_leaks(job, options);
  run_summary(options);
  run_hang(options);
  run_latency(options);
  run_memory(options, every_one_idle);
  options.output = "/dev/null";
  run_timeline(options);
  options.output = path + ".out.json.gz";
  run_timeline(options);
  options.output = path + ".html";
  run_html(options, every_one_idle);
  options.output = "";
  run_metrics(options);
  options.output = path + ".export";  // its files are named by the input: replaced each time
  run_export(options, "");
  return 0;
}
