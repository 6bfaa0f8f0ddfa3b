#include "model/clock_align.h"

#include "model/job_model.h"
#include "model/job_files.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <cstring>
#include <map>
#include <unordered_map>

namespace ncclwatch::model {
namespace {

using namespace trace;

// Collectives sampled per file, and how far past them to look for their GPU timings, in records
// and in bytes from the start of the file (the first ring chunk holds the first ops).
constexpr size_t kSamples = 256;
constexpr uint64_t kMaxRecordsRead = 50000;
constexpr uint64_t kPrefixBytes = uint64_t{1} << 20;

struct EndSample {
  uint64_t comm_id;
  uint64_t seq;
  int64_t host_end;  // monotonic: the call returned
  int64_t gpu_end;   // monotonic: the GPU finished it (0 unknown)
};

struct FileSamples {
  bool ok = false;
  FileHeader header{};
  std::vector<EndSample> samples;
};

// The collectives' ends in file i, read from its first kPrefixBytes or, where those hold none
// (a trace whose ops lie in ring chunks further on), from as much of it as it takes: the file is
// still read once, the main pass reading only what sampling did not.
FileSamples sample_file(JobFiles& files, size_t i) {
  FileSamples out;
  for (uint64_t bytes : {kPrefixBytes, std::numeric_limits<uint64_t>::max()}) {
    out = FileSamples{};
    std::unordered_map<uint64_t, size_t> pending;  // launch_id -> sample
    uint64_t seen = 0;
    out.ok = files.read_prefix(
        i, bytes,
        [&](const RecordView& r) {
          if (r.type == RecordType::kCollective) {
            const auto* o = r.as<OpRecord>();
            if (o && is_collective(static_cast<Api>(o->api)) && o->seq && out.samples.size() < kSamples &&
                !(o->flags & kOpCaptured) && o->group_depth == 0) {
              if (o->flags & kOpTimed) pending[o->launch_id] = out.samples.size();
              out.samples.push_back({o->comm_id, o->seq, o->host_end_ns, 0});
            }
          } else if (r.type == RecordType::kGpuTiming) {
            const auto* g = r.as<GpuTimingRecord>();
            if (auto it = g ? pending.find(g->launch_id) : pending.end(); it != pending.end()) {
              out.samples[it->second].gpu_end = g->gpu_end_ns;
              pending.erase(it);
            }
          }
          return ++seen < kMaxRecordsRead && (out.samples.size() < kSamples || !pending.empty());
        },
        out.header);
    if (!out.ok || !out.samples.empty() || seen >= kMaxRecordsRead) break;
  }
  return out;
}

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

struct Host {
  std::string name;
  int64_t base = 0;  // monotonic -> wall, from the host's first trace
  std::map<std::pair<uint64_t, uint64_t>, int64_t> gpu_end, host_end;  // (comm, seq) -> wall
  bool aligned = false;
  int64_t shift = 0;
  size_t used = 0;
  int64_t spread = 0;
  std::string by;
  std::string against;
};

}  // namespace

ClockModel align_clocks(JobFiles& files, unsigned threads) {
  std::vector<FileSamples> sampled(files.size());
  parallel_for(files.size(), threads, [&](size_t i, unsigned) { sampled[i] = sample_file(files, i); });

  std::vector<Host> hosts;
  std::vector<size_t> host_of(files.size(), 0);
  for (size_t i = 0; i < files.size(); ++i) {
    if (!sampled[i].ok) continue;
    const FileHeader& h = sampled[i].header;
    std::string name(h.host, strnlen(h.host, sizeof(h.host)));
    auto it = std::find_if(hosts.begin(), hosts.end(), [&](const Host& x) { return x.name == name; });
    if (it == hosts.end()) {
      hosts.push_back(Host{});
      hosts.back().name = name;
      hosts.back().base = wrap_sub(h.start_wall_ns, h.start_mono_ns);
      it = hosts.end() - 1;
    }
    host_of[i] = static_cast<size_t>(it - hosts.begin());
    for (const EndSample& s : sampled[i].samples) {
      it->host_end.try_emplace({s.comm_id, s.seq}, wrap_add(s.host_end, it->base));
      if (s.gpu_end) it->gpu_end.try_emplace({s.comm_id, s.seq}, wrap_add(s.gpu_end, it->base));
    }
  }

  // Shift every host onto an already aligned one through the collectives both saw end.
  auto differences = [](const std::map<std::pair<uint64_t, uint64_t>, int64_t>& ref, int64_t ref_shift,
                        const std::map<std::pair<uint64_t, uint64_t>, int64_t>& mine) {
    std::vector<int64_t> d;
    for (const auto& [key, t] : mine)
      if (auto it = ref.find(key); it != ref.end()) d.push_back(wrap_sub(wrap_add(it->second, ref_shift), t));
    return d;
  };
  if (!hosts.empty()) {
    hosts[0].aligned = true;
    hosts[0].by = "reference";
  }
  for (bool progress = true; progress;) {
    progress = false;
    for (Host& h : hosts) {
      if (h.aligned) continue;
      for (const Host& g : hosts) {
        if (!g.aligned) continue;
        std::vector<int64_t> d = differences(g.gpu_end, g.shift, h.gpu_end);
        std::string by = "gpu_end";
        if (d.size() < 3) {
          d = differences(g.host_end, g.shift, h.host_end);
          by = "host_end";
        }
        if (d.empty()) continue;
        h.shift = median(d);
        std::vector<int64_t> deviation;
        for (int64_t x : d) deviation.push_back(static_cast<int64_t>(std::min<uint64_t>(magnitude(wrap_sub(x, h.shift)), INT64_MAX)));
        h.spread = median(deviation);
        h.used = d.size();
        h.by = by;
        h.against = g.name;
        h.aligned = progress = true;
        break;
      }
    }
  }

  ClockModel model;
  model.offset_ns.assign(files.size(), 0);
  model.known.assign(files.size(), 0);
  model.start_ns.assign(files.size(), 0);
  for (size_t i = 0; i < files.size(); ++i) {
    if (!sampled[i].ok) continue;
    const Host& h = hosts[host_of[i]];
    model.offset_ns[i] = wrap_add(h.base, h.shift);
    model.known[i] = 1;
    model.start_ns[i] = wrap_add(sampled[i].header.start_mono_ns, model.offset_ns[i]);
  }
  size_t unaligned = 0;
  for (const Host& h : hosts) {
    unaligned += !h.aligned;
    nlohmann::json j = {{"host", h.name}, {"shift_us", h.shift / 1e3}, {"aligned", h.aligned}};
    if (h.used) {
      j["collectives_used"] = h.used;
      j["spread_us"] = h.spread / 1e3;
      j["by"] = h.by;
      j["against"] = h.against;
    } else if (h.by == "reference") {
      j["reference"] = true;
    }
    model.hosts.push_back(j);
  }
  if (hosts.size() <= 1)
    model.method = "one host: all processes share its CLOCK_MONOTONIC, mapped to wall time through the first trace's header";
  else
    model.method = fmt::format(
        "per host, CLOCK_MONOTONIC mapped to wall time through the host's first trace header; hosts then shifted onto "
        "host {} so that the ends of the same collectives coincide (median over up to {} collectives per trace, GPU "
        "end times where the shim timed them, else the host call's return){}",
        hosts[0].name, kSamples,
        unaligned ? fmt::format("; {} host(s) shared no collective with the others and keep their wall clock", unaligned)
                  : "");
  return model;
}

}  // namespace ncclwatch::model
