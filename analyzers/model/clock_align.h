// Puts the timestamps of every process of a job on one clock.
//
// Processes of one host share CLOCK_MONOTONIC, so one mapping per host (monotonic -> wall time,
// from the header of the host's first trace) keeps their order exact. Wall clocks of different hosts
// disagree by whatever NTP left, often milliseconds, which is as large as what the analyzers look
// for. So hosts are shifted onto the first host's clock using the ends of the collectives they
// shared: a collective completes at nearly the same instant on every rank (nobody finishes before the
// last rank's data arrived), so the median difference of its end times is the clock offset.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace ncclwatch::model {

struct ClockModel {
  // Per input file (the order given to align_clocks): aligned ns = monotonic ns + offset. Aligned
  // time is wall time (ns since the epoch) on the reference host's clock.
  std::vector<int64_t> offset_ns;
  std::vector<char> known;   // per file: offset_ns was set
  std::vector<int64_t> start_ns;  // per file: when its process started, aligned (0 unknown)
  std::string method;        // how the clocks were aligned, in words
  nlohmann::json hosts = nlohmann::json::array();  // per host: shift, samples, spread, reference

  int64_t offset(size_t file) const { return file < offset_ns.size() ? offset_ns[file] : 0; }
};

class JobFiles;

// Reads the first collectives of every file, from a bounded prefix of it, and aligns the hosts.
ClockModel align_clocks(JobFiles& files, unsigned threads);

}  // namespace ncclwatch::model
