// summary: one screen about the whole job: ranks, hosts, communicators, leaks, slowest ops,
// stalls, mismatches (even when nothing hung), environment differences, and the first thing to
// look at. summary_report gathers it from the other reports' results; the printers only print it.
#include "reports/analysis_json.h"
#include "reports/commands.h"
#include "reports/input.h"
#include "reports/job_identity.h"
#include "reports/leak_report.h"
#include "reports/output.h"
#include "reports/summary_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>

namespace ncclwatch::report {

using nlohmann::json;

namespace {

// "train.py:43 (main)" where Python made them; else "one call site" (`leaks` symbolizes it).
std::string pile_up_site(const CommPileUp& pile) {
  if (pile.example && !pile.example->python_site.empty()) return valid_utf8(pile.example->python_site.front().describe_short());
  return "one call site";
}

// Whether a process ended other than by exiting with status 0: killed, a status, an exception.
bool ended_badly(const ProcessTrace& p) {
  if (!p.process_end) return false;  // counted apart (processes_without_final_record)
  if (p.ending.count(std::string(trace::ending_record::kExceptionType))) return true;
  auto reason = static_cast<trace::ExitReason>(p.process_end->reason);
  return reason == trace::ExitReason::kSignal ||
         ((reason == trace::ExitReason::kExited || reason == trace::ExitReason::kQuickExit) && p.process_end->signal != 0);
}

// The job's size and how its processes ended: traces, ranks, hosts, communicators, processes
// killed or ended by a signal, records lost.
void count_processes(const JobAnalysis& a, SummaryReport& s) {
  const Job& job = a.job;
  std::set<uint64_t> comm_ids;
  for (size_t i = 0; i < job.processes.size(); ++i) {
    const ProcessTrace& p = job.processes[i];
    s.hosts.insert(p.host());
    s.lost_records += p.lost_records;
    if (!p.process_end) ++s.processes_without_final_record;
    else if (p.process_end->reason == static_cast<uint32_t>(trace::ExitReason::kSignal))
      ++s.ended_by_signal[signal_name(p.process_end->signal)];
    if (ended_badly(p)) {
      // The signal that killed it where one did, as the ending text names it; else the first that arrived.
      bool killed = p.process_end->reason == static_cast<uint32_t>(trace::ExitReason::kSignal);
      const trace::SignalRecord* arrival = signal_arrival(p, killed ? p.process_end->signal : 0);
      s.bad_endings.push_back({world_rank(p), p.pid(), process_ending_text(p),
                               arrival ? std::optional(*arrival) : std::nullopt});
    }
    for (const CommInstance& c : p.comms)
      if (c.state != CommState::kInitFailed) comm_ids.insert(c.id);
  }
  for (const CommOps& c : a.comms) comm_ids.insert(c.comm_id);
  comm_ids.erase(0);
  s.traces = job.processes.size();
  s.ranks = count_world_ranks(a);
  s.communicators = comm_ids.size();
}

// Which NCCL copies the traces cover, grouped across processes, by path.
std::map<std::string, SummaryReport::LibraryUse> library_uses(const Job& job) {
  std::map<std::string, SummaryReport::LibraryUse> libraries;
  for (const ProcessTrace& p : job.processes) {
    for (const NcclLibrary& lib : p.libraries) {
      SummaryReport::LibraryUse& use = libraries[lib.path];
      // attached wins over unused: one process may call a copy another only loaded
      if (use.status.empty() || lib.attached() || lib.not_traced()) {
        use.version = lib.version;
        use.status = lib.status;
        use.how = lib.attached() ? lib.reached : lib.reason;
      }
      ++use.processes;
    }
  }
  return libraries;
}

// The slowest ops: latency rows by their worst steady-state time (first calls are set-up).
std::vector<LatencyRow> slowest_ops(const LatencyTable& latency) {
  std::vector<const LatencyRow*> rows;
  for (const LatencyRow& r : latency.rows)
    if (r.max_us) rows.push_back(&r);
  std::sort(rows.begin(), rows.end(), [](const LatencyRow* x, const LatencyRow* y) { return *x->max_us > *y->max_us; });
  if (rows.size() > 5) rows.resize(5);
  std::vector<LatencyRow> out;
  for (const LatencyRow* r : rows) out.push_back(*r);
  return out;
}

json bad_endings_json(const SummaryReport& s) {
  json out = json::array();
  for (const SummaryReport::Ending& e : s.bad_endings) {
    json ending = {{"rank", e.rank}, {"pid", e.pid}, {"ended", e.text}};
    if (e.signal) {
      const trace::SignalRecord& sig = *e.signal;
      ending["signal"] = {{"signal", signal_name(sig.signal)}, {"handled", sig.handled != 0},
                          {"sender_pid", sig.sender_pid ? json(sig.sender_pid) : json(nullptr)},
                          {"sender_name", signal_sender_name(sig)},
                          {"sender_is_parent", sig.sender_is_parent != 0}, {"sender_uid", sig.sender_uid}};
    }
    out.push_back(std::move(ending));
  }
  return out;
}

json pile_ups_json(const LeakReport& leaks) {
  json list = json::array();
  for (const PileUpFinding& f : leaks.pile_ups) {
    const CommPileUp& pile = f.pile;
    list.push_back({{"made", pile.made}, {"not_destroyed", pile.not_destroyed}, {"peak_alive", pile.peak_alive},
                    {"ranks", pile.ranks}, {"site", pile.site_key}, {"created_at", pile_up_site(pile)}});
  }
  return list;
}

// The job, its NCCL copies and how its processes ended.
void print_job_lines(const SummaryReport& s) {
  print_text("ncclwatch summary: {} process trace(s), {} rank(s) on {} host(s), {} communicator(s)\n", s.traces, s.ranks,
             s.hosts.size(), s.communicators);
  std::string by_state;
  for (const auto& [state, n] : s.leaks.state_counts) by_state += fmt::format("{}{} {}", by_state.empty() ? "" : ", ", n, state);
  if (!by_state.empty()) print_text("  communicator instances: {}\n", by_state);
  for (const auto& [path, use] : s.libraries) {
    if (use.status == trace::library_record::kNotTraced)
      print_text("  NOT TRACED: {} in {} process(es): {}\n", path, use.processes, use.how);
    else
      print_text("  NCCL {} {}: {} in {} process(es){}\n", nccl_version_text(use.version), path, use.status, use.processes,
                 use.how.empty() ? "" : " (" + use.how + ")");
  }
  if (s.processes_without_final_record)
    print_text("  {} process(es) ended without a final record (killed or crashed)\n", s.processes_without_final_record);
  for (const auto& [name, n] : s.ended_by_signal) print_text("  {} process(es) ended by {}\n", n, name);
  constexpr size_t kEndingsShown = 4;
  for (size_t i = 0; i < s.bad_endings.size() && i < kEndingsShown; ++i)
    print_text("  ENDED: rank {} (pid {}) {}\n", s.bad_endings[i].rank, s.bad_endings[i].pid, s.bad_endings[i].text);
  if (s.bad_endings.size() > kEndingsShown)
    print_text("  ... and {} more process(es) that did not end well\n", s.bad_endings.size() - kEndingsShown);
  if (s.lost_records) print_text("  {} record(s) were lost while tracing\n", s.lost_records);
  if (s.window.partial()) print_text("  {}\n", s.window.text());
}

// What leaked, piled up or was released out of order.
void print_leak_lines(const LeakReport& leaks) {
  if (leaks.leaks())
    print_text("  LEAKS: {} communicator(s) never destroyed{}, {} resource(s) never released — run `ncclwatch-report leaks`\n",
               leaks.leaked.size(),
               leaks.leaked_memory_bytes
                   ? fmt::format(" (holding {} of GPU memory, all ranks)", bytes_text(leaks.leaked_memory_bytes))
                   : "",
               leaks.open_resources.size());
  else
    print_text("  no leaks: every communicator and resource was released\n");
  for (const PileUpFinding& f : leaks.pile_ups)
    print_text("  PILING UP: {} communicators made at {} on rank(s) {} in {} bursts, {} never destroyed before "
               "exit, at most {} alive at once — run `ncclwatch-report leaks`\n",
               f.pile.made, pile_up_site(f.pile), ranks_text(f.pile.ranks), f.pile.bursts, f.pile.not_destroyed,
               f.pile.peak_alive);
  if (!leaks.order.empty())
    print_text("  ORDER: {} resource(s) released out of order or registered twice — run `ncclwatch-report leaks`\n",
               leaks.order.size());
}

// Mismatches, hangs, departures, stalls, stragglers and settings that differ.
void print_hang_lines(const HangReport& hang) {
  if (hang.mismatched_seqs)
    print_text("  MISMATCHES: ranks passed different arguments to {} collective(s) — run `ncclwatch-report hang`\n",
               hang.mismatched_seqs);
  if (hang.init_hung_ranks)
    print_text("  HANG: {} rank(s) entered a communicator's creation and never returned — run `ncclwatch-report hang`\n",
               hang.init_hung_ranks);
  if (hang.missing_ranks || hang.absent_ranks)
    print_text("  HANG: {} rank(s) stopped short, {} rank(s) left no trace — run `ncclwatch-report hang`\n", hang.missing_ranks,
               hang.absent_ranks);
  if (hang.divergences) print_text("  {} rank(s) departed from their peers' program\n", hang.divergences);
  if (hang.stall_records) print_text("  {} stall record(s) from the watchdog\n", hang.stall_records);
  for (const std::string& s : hang.stragglers) print_text("  STRAGGLER: {}\n", s);
  for (const std::string& s : hang.slow_peers) print_text("  SLOW PEER: {}\n", s);
  for (const std::string& key : hang.environment_keys) print_text("  environment differs across ranks: {}\n", key);
}

void print_slowest_ops(const std::vector<LatencyRow>& rows) {
  if (rows.empty()) return;
  print_text("  slowest ops:\n");
  for (const LatencyRow& r : rows)
    print_text("    {} {} B on comm {}: max {:.1f} us, p50 {:.1f} us ({}, {} calls){}\n", trace::api_name(r.api), r.bytes,
               r.name.empty() ? hex_id(r.comm_id) : fmt::format("\"{}\" ({})", r.name, hex_id(r.comm_id)), *r.max_us, *r.p50_us,
               r.timing == TimingSource::kHost ? "host enqueue" : timing_name(r.timing), r.calls,
               // a first call worth naming: slower than any steady one (NCCL's connection set-up)
               !r.first_call_max_us || *r.first_call_max_us <= *r.max_us
                   ? ""
                   : fmt::format("; first call up to {:.1f} ms (set-up)", *r.first_call_max_us / 1e3));
}

// "GPU MEMORY: NCCL held up to 232 MiB on rank 0 (pid 8573, peak 0.0 s after it started); 128 MiB
// of it still held at exit by 1 communicator(s) never destroyed; 104 MiB in 2 idle communicator
// rank(s) — run `ncclwatch-report memory`"
void print_memory_line(const SummaryReport& s) {
  if (!s.memory_peak || !s.memory_peak->peak_bytes) return;
  const ProcessMemory& m = *s.memory_peak;
  print_text("  GPU MEMORY: NCCL held up to {} on rank {} (pid {}, peak {:.1f} s after it started){}{}\n", bytes_text(m.peak_bytes),
             m.rank, m.process->pid(), m.peak_after_start_s(),
             m.held_at_end_bytes ? fmt::format("; {} of it still held at exit by {} communicator(s) never destroyed",
                                               bytes_text(m.held_at_end_bytes), m.unreleased_comms)
                                 : "",
             s.idle_communicators ? fmt::format("; {} in {} idle communicator rank(s) across the job — run `ncclwatch-report "
                                                "memory`",
                                                bytes_text(s.idle_memory_bytes), s.idle_communicators)
                                  : "");
}

void print_summary_text(const SummaryReport& s) {
  print_job_lines(s);
  print_memory_line(s);
  print_leak_lines(s.leaks);
  print_hang_lines(s.hang);
  print_slowest_ops(s.slowest_ops);
  if (!s.advised_settings.empty())
    // Joined first: print_text makes each argument printable (the values come from the traces).
    print_text("  SETTINGS worth a look: {} — run `ncclwatch-report advice`\n",
               fmt::format("{}", fmt::join(s.advised_settings, ", ")));
  print_text("  look first at: {}\n", s.first_look);
}

}  // namespace

std::set<int32_t> world_ranks_of(const JobAnalysis& a, size_t process) {
  // The widest communicator it is part of, made (lifecycle records) or used (ops): a DeviceMesh job
  // runs its ops on the mesh's groups, never on the world communicator it made them from.
  int32_t widest = 0;
  for (const RankComm& c : a.ops[process].comms) widest = std::max(widest, c.nranks);
  for (const CommInstance& c : a.job.processes[process].comms)
    if (c.rank >= 0) widest = std::max(widest, c.nranks);
  std::set<int32_t> ranks;
  for (const RankComm& c : a.ops[process].comms)
    if (c.rank >= 0 && c.nranks == widest) ranks.insert(c.rank);
  if (ranks.empty())
    for (const CommInstance& c : a.job.processes[process].comms)
      if (c.rank >= 0 && c.nranks == widest) ranks.insert(c.rank);
  return ranks;
}

size_t count_world_ranks(const JobAnalysis& a) {
  std::set<int32_t> world_ranks;
  size_t processes_with_ranks = 0;
  for (size_t i = 0; i < a.job.processes.size(); ++i) {
    std::set<int32_t> ranks = world_ranks_of(a, i);
    processes_with_ranks += !ranks.empty();
    world_ranks.merge(ranks);
  }
  // Without one communicator over the whole job (processes in disjoint groups only), the ranks
  // of the widest ones repeat across processes: then each process counts.
  return std::max(world_ranks.size(), processes_with_ranks);
}

std::string first_look_at(const LeakReport& leaks, const HangReport& hang) {
  // A teardown that never returned is why the job did not end, unless ranks disagreed about what
  // they ran before it (a rank missing an op, a mismatch), which a teardown hang follows from.
  bool program_differs = hang.missing_ranks || hang.absent_ranks || hang.mismatched_seqs || hang.init_hung_ranks ||
                         hang.divergences;
  if (!leaks.teardown_hangs.empty() && !program_differs)
    return "teardown hung: " + teardown_hang_text(leaks.teardown_hangs.front()) + " — run `ncclwatch-report hang`";
  if (hang.findings) return hang.verdict;
  if (!leaks.pile_ups.empty())
    return fmt::format("communicators piling up: {} made at {}, earlier ones still alive as more were made — run "
                       "`ncclwatch-report leaks`",
                       leaks.pile_ups.front().pile.made, pile_up_site(leaks.pile_ups.front().pile));
  if (leaks.leaks())
    return fmt::format("leaks: {} communicator(s) never destroyed, {} resource(s) never released — run `ncclwatch-report leaks`",
                       leaks.leaked.size(), leaks.open_resources.size());
  if (!leaks.order.empty())
    return fmt::format("{} resource(s) released out of order or registered twice — run `ncclwatch-report leaks`",
                       leaks.order.size());
  if (!leaks.untraced.empty())
    return "not traced: " + leaks.untraced.front().path + " (" + leaks.untraced.front().reason +
           "): its NCCL calls are in no trace";
  if (!hang.stragglers.empty() || !hang.slow_peers.empty() || !hang.environment_keys.empty()) return hang.verdict;
  return "nothing: no leak, hang or mismatch found";
}

json memory_peak_json(const SummaryReport& s) {
  if (!s.memory_peak) return nullptr;
  const ProcessMemory& m = *s.memory_peak;
  return {{"bytes", m.peak_bytes}, {"rank", m.rank}, {"pid", m.process->pid()}, {"after_start_s", m.peak_after_start_s()},
          {"held_at_exit_bytes", m.held_at_end_bytes}, {"unreleased_communicators", m.unreleased_comms}};
}

SummaryReport summary_report(const JobAnalysis& a) {
  SummaryReport s;
  count_processes(a, s);
  s.leaks = leak_report(a.job, /*symbolize=*/false);  // summary names no native frame
  std::vector<ProcessMemory> memory = nccl_memory_by_process(a.job, a.ops);
  if (const ProcessMemory* peak = largest_peak(memory)) s.memory_peak = *peak;
  for (const ProcessMemory& m : memory) {
    add_saturated(s.idle_memory_bytes, m.idle_bytes);
    s.idle_communicators += m.idle_comms;
  }
  s.hang = hang_report(a);
  LatencyTable latency = latency_table(a);
  s.slowest_ops = slowest_ops(latency);
  s.window = latency.window;
  for (const SettingAdvice& advice : settings_advice(a, latency)) s.advised_settings.push_back(advice.setting + "=" + advice.value);
  s.libraries = library_uses(a.job);
  s.first_look = first_look_at(s.leaks, s.hang);
  // A copy we could not trace is a finding: "no leaks" cannot be vouched for.
  s.findings = s.leaks.findings() || s.hang.findings || !s.leaks.untraced.empty();
  return s;
}

json to_json(const SummaryReport& s) {
  const LeakReport& leaks = s.leaks;
  const HangReport& hang = s.hang;
  json slowest = json::array();
  for (const LatencyRow& r : s.slowest_ops) slowest.push_back(to_json(r));
  json nccl = json::array();
  for (const auto& [path, use] : s.libraries)
    nccl.push_back({{"path", path}, {"version", use.version}, {"status", use.status}, {"how", use.how},
                    {"processes", use.processes}});
  return {{"traces", s.traces},
          {"ranks", s.ranks},
          {"hosts", s.hosts},
          {"communicators", s.communicators},
          {"states", leaks.state_counts},
          {"leaked_communicators", leaks.leaked.size()},
          {"leaked_instances", leaks.leaked_instances.size()},
          {"leaked_gpu_memory_bytes", leaks.leaked_memory_bytes},
          {"gpu_memory_peak", memory_peak_json(s)},
          {"idle_gpu_memory_bytes", s.idle_memory_bytes},
          {"idle_communicators", s.idle_communicators},
          {"unreleased_resources", leaks.open_resources.size()},
          {"piling_up", pile_ups_json(leaks)},
          {"resources_out_of_order", leaks.order.size()},
          {"peak_alive_communicators", leaks.peak.count},
          {"processes_without_final_record", s.processes_without_final_record},
          {"ended_by_signal", s.ended_by_signal},
          {"bad_endings", bad_endings_json(s)},
          {"lost_records", s.lost_records},
          {"mismatched_seqs", hang.mismatched_seqs},
          {"missing", hang.missing_ranks},
          {"absent_ranks", hang.absent_ranks},
          {"init_never_returned", hang.init_hung_ranks},
          {"stall_records", hang.stall_records},
          {"divergences", hang.divergences},
          {"stragglers", hang.stragglers},
          {"slow_peers", hang.slow_peers},
          {"slowest_ops", slowest},
          {"environment", to_json(hang.environment)},
          {"advised_settings", s.advised_settings},
          {"window", s.window.to_json()},
          {"verdict", hang.verdict},
          {"first_look", s.first_look},
          {"nccl_libraries", nccl}};
}

int run_summary(const Options& options) {
  std::optional<JobAnalysis> analysis = load_job_or_explain(options.inputs, AnalysisOptions{});
  if (!analysis) return kNoUsableInput;
  SummaryReport summary = summary_report(*analysis);
  if (options.json)
    std::cout << dump_json(to_json(summary), 2) << "\n";
  else
    print_summary_text(summary);
  return summary.findings ? 1 : 0;
}

}  // namespace ncclwatch::report
