// The one pass over a job's trace files that every report makes: the inputs expanded, the clocks
// aligned from a bounded prefix of each file, the files read in parallel, each record handed to
// the lifecycle fold and to the sinks the report asked for, the problems merged in file order.
// Each file is opened once and read once; what a later pass needs (the divergence's call orders,
// the lateness map) comes from the files' images, kept in memory up to a budget.
#pragma once

#include "model/clock_align.h"
#include "model/job_files.h"
#include "model/job_model.h"
#include "model/trace_reader.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace ncclwatch::model {

// What a report does with one file's records besides folding its lifecycle.
class FileSink {
 public:
  struct Start {
    size_t file;
    const ProcessTrace& process;  // its header read
    const ClockModel& clock;
    int64_t clock_offset;         // aligned ns = monotonic ns + clock_offset (its own wall clock where not aligned)
  };
  virtual ~FileSink() = default;
  // Once, before the first record.
  virtual void start(const Start&) {}
  virtual void add(const RecordView& record) = 0;
  // After the last record, before the lifecycle's finish.
  virtual void end_of_records() {}
  // After the lifecycle's finish (when the file was usable); `problems` are the file's.
  virtual void finish(ProcessTrace&, bool /*usable*/, std::vector<TraceProblem>& /*problems*/) {}
};

struct JobRead;

// A report's part in the pass: a FileSink for each file it reads.
class JobSink {
 public:
  virtual ~JobSink() = default;
  // Before the pass, once the files are known and their clocks aligned.
  virtual void prepare(const JobRead& /*job*/) {}
  // The sink of file `file` (`process`: as the lifecycle fold fills it), read on reader thread
  // `thread`. Each thread reads one file at a time: its sinks may share a per-thread aggregate.
  virtual std::unique_ptr<FileSink> open(size_t file, unsigned thread, ProcessTrace& process) = 0;
};

struct ReadOptions {
  bool align_clocks = true;    // hosts on one clock (hang, timeline, export)
  bool keep_for_later = false;  // a later pass reads the files again (the HTML): keep their images
  unsigned threads = 0;        // 0: reader_threads()
};

struct JobRead {
  std::shared_ptr<JobFiles> files;       // every file the inputs named
  ClockModel clock;                      // per file, when asked for
  std::vector<ProcessTrace> processes;   // per file
  std::vector<char> usable;              // per file
  std::vector<TraceProblem> problems;    // the inputs', then each file's, in file order
  std::vector<int64_t> clock_offset;     // per file: aligned, or its own wall clock where not known
  unsigned threads = 1;
  uint64_t records = 0;                  // of the usable files
};

JobRead read_job(const std::vector<std::string>& inputs, const ReadOptions& options,
                 std::initializer_list<JobSink*> sinks);

// Reads every input (files or directories), several files at a time, lifecycles only. Unusable
// files are listed in problems.
Job load_job(const std::vector<std::string>& inputs);

// The job a pass read: its usable processes and its problems (what load_job gives).
Job job_of(JobRead&& pass);

}  // namespace ncclwatch::model
