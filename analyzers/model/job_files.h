// The trace files of one job, each opened once and read once however many passes over them a
// report makes (the clock sampling, the main pass, the later passes of the HTML).
#pragma once

#include "model/trace_reader.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ncclwatch::model {

class TraceImage;

// The trace files of one job, each opened once and read once however many passes a report makes.
// The clock sampling reads a bounded prefix of each, the main pass the rest. An image is kept for
// later passes while the images kept fit the budget (a quarter of the machine's memory, at most
// 8 GiB) and the open files the descriptors; past it, a later pass reads the file again.
class JobFiles {
 public:
  JobFiles(std::vector<std::string> paths, bool keep_for_later);
  ~JobFiles();
  JobFiles(const JobFiles&) = delete;
  JobFiles& operator=(const JobFiles&) = delete;

  size_t size() const { return paths_.size(); }
  const std::string& path(size_t i) const { return paths_[i]; }
  const std::vector<std::string>& paths() const { return paths_; }

  // The records in the first `bytes` of file i until `visit` stops; false when the file cannot be
  // read. Its problems are the main pass's to name.
  bool read_prefix(size_t i, uint64_t bytes, const StoppableVisitor& visit, trace::FileHeader& header);
  // All of file i's records (a visitor that returns false stops it), its problems named.
  bool read(size_t i, const StoppableVisitor& visit, trace::FileHeader& header, ReadStats& stats,
            std::vector<TraceProblem>& problems);
  // All of file i's records again, for a later pass (its problems were named by the first).
  bool read_again(size_t i, const RecordVisitor& visit);

 private:
  struct File;
  void keep(File& f);
  void uncount(File& f);

  std::vector<std::string> paths_;
  std::vector<std::unique_ptr<File>> files_;
  bool keep_for_later_;
  uint64_t budget_bytes_;
  size_t budget_open_;
  std::atomic<uint64_t> kept_bytes_{0};
  std::atomic<size_t> kept_open_{0};
};

}  // namespace ncclwatch::model
