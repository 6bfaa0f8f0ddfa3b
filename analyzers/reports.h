// The report subcommands. Each returns the process exit code of the contract:
// 0 nothing found, 1 findings, 2 no usable input.
#pragma once

#include "job_model.h"

#include <string>
#include <vector>

namespace ncclwatch::report {

struct Options {
  std::vector<std::string> inputs;
  bool json = false;
  bool symbolize = true;
};

int run_leaks(const Job& job, const Options& options);
int run_summary(const Job& job, const Options& options);
int run_dump(const std::string& path, const Options& options);

// Names unusable or damaged inputs on stderr.
void print_problems(const std::vector<TraceProblem>& problems);

}  // namespace ncclwatch::report
