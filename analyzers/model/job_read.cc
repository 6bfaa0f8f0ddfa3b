#include "model/job_read.h"

#include "model/job_inputs.h"
#include "model/lifecycle_fold.h"
#include "model/parallel_for.h"

#include <algorithm>

namespace ncclwatch::model {

JobRead read_job(const std::vector<std::string>& inputs, const ReadOptions& options, std::initializer_list<JobSink*> sinks) {
  JobRead job;
  std::vector<std::string> paths = expand_inputs(inputs, job.problems);
  size_t n = paths.size();
  job.files = std::make_shared<JobFiles>(std::move(paths), options.keep_for_later);
  JobFiles& files = *job.files;
  unsigned threads = options.threads ? options.threads : reader_threads(n);
  job.threads = threads = std::max(1u, std::min<unsigned>(threads, 255));
  if (options.align_clocks) job.clock = align_clocks(files, threads);

  job.processes.resize(n);
  job.usable.assign(n, 0);
  job.clock_offset.assign(n, 0);
  for (JobSink* sink : sinks) sink->prepare(job);
  std::vector<std::vector<TraceProblem>> problems(n);
  parallel_for(n, threads, [&](size_t i, unsigned thread) {
    ProcessTrace& p = job.processes[i];
    p.path = valid_utf8(files.path(i));
    LifecycleFold lifecycle(p);
    std::vector<std::unique_ptr<FileSink>> made;
    made.reserve(sinks.size());
    for (JobSink* sink : sinks) made.push_back(sink->open(i, thread, p));
    bool started = false;
    job.usable[i] = files.read(
        i,
        [&](const RecordView& r) {
          if (!started) {  // the header is read before the first record
            job.clock_offset[i] = i < job.clock.known.size() && job.clock.known[i]
                                      ? job.clock.offset_ns[i]
                                      : wrap_sub(p.header.start_wall_ns, p.header.start_mono_ns);
            for (auto& sink : made) sink->start({i, p, job.clock, job.clock_offset[i]});
            started = true;
          }
          lifecycle.add(r);
          for (auto& sink : made) sink->add(r);
          return true;
        },
        p.header, p.stats, problems[i]);
    for (auto& sink : made) sink->end_of_records();
    if (job.usable[i]) lifecycle.finish(problems[i]);
    for (auto& sink : made) sink->finish(p, job.usable[i], problems[i]);
  });
  for (size_t i = 0; i < n; ++i) {
    job.problems.insert(job.problems.end(), problems[i].begin(), problems[i].end());
    if (job.usable[i]) job.records += job.processes[i].stats.records;
  }
  return job;
}

Job load_job(const std::vector<std::string>& inputs) {
  ReadOptions read;
  read.align_clocks = false;  // lifecycles only
  return job_of(read_job(inputs, read, {}));
}

Job job_of(JobRead&& pass) {
  Job job;
  job.problems = std::move(pass.problems);
  for (size_t i = 0; i < pass.processes.size(); ++i)
    if (pass.usable[i]) job.processes.push_back(std::move(pass.processes[i]));
  return job;
}

}  // namespace ncclwatch::model
