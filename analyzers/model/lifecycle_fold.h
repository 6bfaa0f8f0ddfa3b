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
  void add(const RecordView& record) {
    // Most of a file: ops and their timings, which say nothing of a lifecycle (half the cost of
    // the fold went on passing them down to be ignored).
    if (record.type == trace::RecordType::kCollective || record.type == trace::RecordType::kGpuTiming) return;
    add_lifecycle_record(record);
  }
  // Decides end states; names the file's implausible values (see ImplausibleValues) in `problems`.
  void finish(std::vector<TraceProblem>& problems);

 private:
  void add_lifecycle_record(const RecordView& record);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ncclwatch::model
