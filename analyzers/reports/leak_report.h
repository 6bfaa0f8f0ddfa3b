// leaks' result, typed (report_leaks.cc): what `leaks` prints in each form, and what summary and
// html read, so that they say the same thing.
#pragma once

#include "reports/options.h"

#include <nlohmann/json.hpp>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace ncclwatch::report {

// A call site as the reports show it.
struct SiteText {
  std::string first;                // "train.py:43 (main) via c10d::NCCLComm::create (libtorch_cuda.so)"
  std::vector<std::string> stack;   // native frames, innermost first
  std::vector<PythonFrame> python;  // innermost first
};
// A call site as the reports show it: the Python line leads where there is one; native frames
// named by `symbolizer` (nullptr: addresses, or what the shim read at the call, `recorded`).
SiteText describe_site(Symbolizer* symbolizer, const ProcessTrace& p, const std::vector<uint64_t>& frames,
                       const std::string& recorded, const std::vector<PythonFrame>& python = {});
// One communicator instance (a rank of it in one process), or a resource never released.
struct CommInstanceRow {
  const ProcessTrace* process = nullptr;
  const CommInstance* comm = nullptr;
  SiteText site;
  int32_t world_rank = -1;  // the process's rank in the widest communicator it made
};
struct OpenResourceRow {
  const ProcessTrace* process = nullptr;
  const ResourceInstance* resource = nullptr;
  SiteText site;
};
// A leaked communicator identity across the ranks where it leaked.
struct LeakedComm {
  uint64_t id = 0;
  const CommInstance* first = nullptr;  // the instance of its lowest-numbered process
  const ProcessTrace* process = nullptr;
  std::set<int> ranks;
  std::set<int32_t> world_ranks;  // of the processes where it leaked: how people name a new_group
  std::set<std::string> states;  // how it ended, in words
  std::set<std::string> hosts;
  SiteText site;
};
struct PileUpFinding {
  CommPileUp pile;
  SiteText site;
  std::string text;  // the finding in one sentence, without the remedy
};
struct OrderFinding {
  ResourceOrder order;
  SiteText made;                 // the resource's creation site
  std::string comm_released_at;  // kOutlivedComm: where its communicator was destroyed ("" unknown)
  SiteText earlier;              // kRegisteredTwice: the registration still held
};
// A trace that lost records (NCCLWATCH_MAX_MB, a full disk): end states may rest on what the
// exit record's list said rather than on the history itself.
struct LostHistory {
  const ProcessTrace* process = nullptr;
  uint64_t records = 0;
  bool ends_from_exit_list = false;  // the shim's complete list of live ones at exit decided them
};

// A teardown call (finalize, destroy, abort) entered on some ranks of a communicator and never
// returned: the job hung (or was killed) in its teardown.
struct TeardownHang {
  uint64_t comm_id = 0;
  std::string name;
  trace::Api api = trace::Api::kUnknown;
  std::set<int> ranks;
  double longest_inside_s = 0;  // from the call's entry to the end of that rank's trace
  std::string until;            // how that trace ended: "SIGTERM", "the process exited", ...
};
// "ncclCommFinalize entered on rank(s) 0,1 of comm 1a2b... and never returned (36.0 s until SIGTERM)"
std::string teardown_hang_text(const TeardownHang& hang);

struct LeakReport {
  std::vector<CommInstanceRow> communicators;  // every instance, in file order
  std::vector<TeardownHang> teardown_hangs;
  std::vector<LostHistory> lost_histories;
  std::vector<size_t> leaked_instances;  // indices into communicators
  size_t traces = 0;                     // trace files read
  std::vector<OpenResourceRow> open_resources;
  std::vector<LeakedComm> leaked;  // by identity
  std::map<std::string, int> state_counts;
  std::map<uint64_t, std::set<int>> finalized_only;  // finalized, never destroyed: not a leak by contract
  uint64_t leaked_memory_bytes = 0;  // GPU memory the leaked instances hold as last read, where measured
  bool torch = false;                // PyTorch made a leaked communicator
  std::vector<std::string> remedies; // NVSHMEM's, PyTorch's or NCCL's, for what leaked
  std::vector<PileUpFinding> pile_ups;
  PeakAlive peak;
  std::vector<OrderFinding> order;
  std::vector<UntracedCopy> untraced;
  std::set<std::string> other_builds;     // module files of another build than traced: not symbolized

  bool leaks() const { return !leaked_instances.empty() || !open_resources.empty(); }
  // Exit status 1: leaks, pile-ups, resources out of order.
  bool findings() const { return leaks() || !pile_ups.empty() || !order.empty(); }
};
// `symbolize`: native frames named from the modules' debug information (else addresses, or what
// the shim read at the call).
LeakReport leak_report(const Job& job, bool symbolize);
nlohmann::json to_json(const LeakReport& report);  // `leaks --json`
// The lines naming pile-ups and resources out of order, as `leaks` and html word them.
std::vector<std::string> lifecycle_lines(const LeakReport& report);
// The notes on traces that lost records, as `leaks` words them.
std::vector<std::string> lost_history_lines(const LeakReport& report);
// Names the module files that were not used to symbolize, once, on stderr.
void say_other_builds(const LeakReport& report);

}  // namespace ncclwatch::report
