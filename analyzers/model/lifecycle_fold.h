// Folds the records of one trace file into its ProcessTrace as they stream by (lifecycle_fold.cc),
// so that other analyses share the same pass over the file: the process's own facts, its
// communicators and its resources, with their end states.
#pragma once

#include "model/job_model.h"
#include "model/trace_reader.h"

#include <memory>
#include <vector>

namespace ncclwatch::model {

class LifecycleFold {
 public:
  explicit LifecycleFold(ProcessTrace& out);
  ~LifecycleFold();
  LifecycleFold(const LifecycleFold&) = delete;
  LifecycleFold& operator=(const LifecycleFold&) = delete;
  void add(const RecordView& record);
  // Decides end states; names the file's implausible values (see ImplausibleValues) in `problems`.
  void finish(std::vector<TraceProblem>& problems);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ncclwatch::model
