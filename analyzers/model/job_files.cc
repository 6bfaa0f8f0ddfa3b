#include "model/job_files.h"

#include "model/trace_image.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

namespace ncclwatch::model {
namespace {

uint64_t memory_budget() {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t physical = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  return std::min<uint64_t>(physical / 4, uint64_t{8} << 30);
}

// Descriptors left to kept files: the soft limit less a margin for everything else a report opens.
size_t open_budget() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 1024;
  return limit.rlim_cur > 128 ? static_cast<size_t>(limit.rlim_cur - 128) / 2 : 0;
}

}  // namespace

struct JobFiles::File {
  TraceImage image;
  std::string open_error, lost;
  bool opened = false;       // open() was tried
  bool counted = false;      // in kept_bytes_ (and kept_open_ when counted_open)
  bool counted_open = false;
  uint64_t counted_bytes = 0;
};

JobFiles::JobFiles(std::vector<std::string> paths, bool keep_for_later)
    : paths_(std::move(paths)), keep_for_later_(keep_for_later), budget_bytes_(memory_budget()), budget_open_(open_budget()) {
  files_.reserve(paths_.size());
  for (size_t i = 0; i < paths_.size(); ++i) files_.push_back(std::make_unique<File>());
}

JobFiles::~JobFiles() = default;

void JobFiles::uncount(File& f) {
  if (!f.counted) return;
  kept_bytes_ -= f.counted_bytes;
  if (f.counted_open) --kept_open_;
  f.counted = false;
}

// Keeps f's image for the next pass if it fits the budgets, else frees it.
void JobFiles::keep(File& f) {
  uncount(f);
  uint64_t bytes = f.image.bytes_read();
  bool holds_open = !f.image.complete();
  if (kept_bytes_ + bytes > budget_bytes_ || (holds_open && kept_open_ >= budget_open_)) {
    f.image.release();
    return;
  }
  kept_bytes_ += bytes;
  if (holds_open) ++kept_open_;
  f.counted = true;
  f.counted_bytes = bytes;
  f.counted_open = holds_open;
}

bool JobFiles::read_prefix(size_t i, uint64_t bytes, const StoppableVisitor& visit, trace::FileHeader& header) {
  File& f = *files_[i];
  if (!f.opened) {
    f.opened = true;
    if (!f.image.open(paths_[i], f.open_error)) return false;
  }
  if (!f.image.opened()) return false;
  if (!f.image.read_upto(f.lost, f.open_error, bytes)) return false;
  ReadStats stats;
  std::vector<TraceProblem> ignored;
  bool ok = read_trace_image(f.image, paths_[i], visit, header, stats, ignored) || stats.records > 0;
  keep(f);
  return ok;
}

bool JobFiles::read(size_t i, const StoppableVisitor& visit, trace::FileHeader& header, ReadStats& stats,
                    std::vector<TraceProblem>& problems) {
  File& f = *files_[i];
  if (!f.image.opened()) {
    f.opened = true;
    f.open_error.clear();
    f.lost.clear();
    if (!f.image.open(paths_[i], f.open_error)) {
      problems.push_back(trace_problem(paths_[i], f.open_error, true));
      return false;
    }
  }
  std::string error;
  if (!f.image.read_upto(f.lost, error)) {
    problems.push_back(trace_problem(paths_[i], error, true));
    return false;
  }
  if (!f.lost.empty()) problems.push_back(trace_problem(paths_[i], f.lost, false));
  bool ok = read_trace_image(f.image, paths_[i], visit, header, stats, problems);
  if (keep_for_later_) {
    keep(f);
  } else {
    uncount(f);
    f.image.release();
  }
  return ok;
}

bool JobFiles::read_again(size_t i, const RecordVisitor& visit) {
  File& f = *files_[i];
  auto deliver = [&](const RecordView& r) {
    visit(r);
    return true;
  };
  trace::FileHeader header{};
  ReadStats stats;
  std::vector<TraceProblem> ignored;
  if (f.image.opened() && f.image.complete()) return read_trace_image(f.image, paths_[i], deliver, header, stats, ignored);
  TraceImage again;  // not kept (over the budget, or not asked for): read again
  std::string error, lost;
  if (!again.load(paths_[i], error, lost)) return false;
  return read_trace_image(again, paths_[i], deliver, header, stats, ignored);
}

}  // namespace ncclwatch::model
