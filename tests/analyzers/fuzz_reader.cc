// libFuzzer target: any bytes as a trace file through the reader, the lifecycle model, the op
// scanner and the dump formatter. Nothing may crash, hang or read out of bounds.
#include "op_model.h"
#include "reports.h"

#include <unistd.h>

#include <cstdio>
#include <string>

using namespace ncclwatch::report;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/ncclwatch-fuzz-" + std::to_string(getpid()) + ".nwt";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  AnalysisOptions options;
  options.threads = 1;
  JobAnalysis a = analyze_job({path}, options);
  bool findings = false;
  (void)hang_json(a, findings).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  (void)latency_json(a).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return 0;
}
