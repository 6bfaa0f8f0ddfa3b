// Turns recorded return addresses into "function at file:line (module)" using the modules the
// trace named and their debug information (elfutils libdw), offline and after the fact.
#pragma once

#include "model/job_model.h"

#include <map>
#include <memory>
#include <set>
#include <string>

namespace ncclwatch::model {

struct Frame {
  uint64_t address = 0;
  std::string function;  // demangled, without parameters; empty if unknown
  std::string file;      // source file, empty if no line info
  int line = 0;
  std::string module;    // base name of the object
  uint64_t offset = 0;   // address - module base

  std::string describe() const;  // "fn at file:line (module)" or "module+0xoff"
};

class Symbolizer {
 public:
  Symbolizer();
  ~Symbolizer();
  Frame resolve(const ProcessTrace& process, uint64_t address);
  // Module files found at a traced path but of another build than the process loaded (their GNU
  // build IDs differ): never used, their frames stay module+offset. For the reports to say so.
  const std::set<std::string>& other_builds() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ncclwatch::model
