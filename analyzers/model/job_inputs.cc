#include "model/job_inputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <utility>

namespace ncclwatch::model {

namespace {

namespace fs = std::filesystem;

// Every *.nwt entry, whatever it is: one that is no regular file (a FIFO, a device, a folder) is
// refused when read, and named, not passed over in silence.
std::vector<std::string> own_trace_files(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, fs::directory_options::skip_permission_denied, ec))
    if (entry.path().extension() == trace::kFileExtension) found.push_back(entry.path().string());
  std::sort(found.begin(), found.end());
  return found;
}

// `ncclwatch run`'s job folders directly under `dir` that hold traces, oldest first (by when they
// last changed). A job none of whose processes called NCCL left no trace: it is not "the newest job"
// (it would hide the last one that has traces); `skipped` counts those.
std::vector<std::string> job_folders(const std::string& dir, size_t& skipped) {
  std::vector<std::pair<fs::file_time_type, std::string>> jobs;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, fs::directory_options::skip_permission_denied, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("job-", 0) != 0 || !entry.is_directory(ec)) continue;
    if (own_trace_files(entry.path().string()).empty()) {
      ++skipped;
      continue;
    }
    jobs.emplace_back(fs::last_write_time(entry.path(), ec), entry.path().string());
  }
  std::sort(jobs.begin(), jobs.end());
  std::vector<std::string> out;
  for (auto& [time, path] : jobs) out.push_back(std::move(path));
  return out;
}

}  // namespace

std::vector<std::string> resolve_job_folders(const std::vector<std::string>& inputs, bool all_jobs,
                                             std::vector<std::string>& notes) {
  std::vector<std::string> out;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (!fs::is_directory(input, ec) || !own_trace_files(input).empty()) {
      out.push_back(input);
      continue;
    }
    size_t without_traces = 0;
    std::vector<std::string> jobs = job_folders(input, without_traces);
    if (without_traces && !jobs.empty())
      notes.push_back(fmt::format("passed over {} job folder(s) in {} without traces (no process of theirs called NCCL)",
                                  without_traces, valid_utf8(input)));
    if (jobs.empty()) {
      out.push_back(input);  // expand_inputs names it
    } else if (all_jobs) {
      notes.push_back(fmt::format("reading all {} jobs in {} (--all)", jobs.size(), valid_utf8(input)));
      out.insert(out.end(), jobs.begin(), jobs.end());
    } else {
      if (jobs.size() > 1)
        notes.push_back(fmt::format("reading {}, the newest of {} jobs in {} (name another, or --all for every one)",
                                    valid_utf8(jobs.back()), jobs.size(), valid_utf8(input)));
      else
        notes.push_back(fmt::format("reading {}", valid_utf8(jobs.back())));
      out.push_back(jobs.back());
    }
  }
  return out;
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, std::vector<TraceProblem>& problems) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
      std::vector<std::string> found = own_trace_files(input);
      if (found.empty())
        problems.push_back(trace_problem(input, "folder holds no trace files (*.nwt) of its own; subfolders are not "
                                                "searched (name the job folders to read)",
                                         true));
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::exists(input, ec)) {
      files.push_back(input);
    } else {
      problems.push_back(trace_problem(input, "no such file or directory", true));
    }
  }
  return files;
}

}  // namespace ncclwatch::model
