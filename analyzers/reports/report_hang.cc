// hang: the hang report (hang_analysis.cc) as JSON, CSV and text.
#include "reports/analysis_json.h"
#include "reports/commands.h"
#include "reports/input.h"
#include "reports/output.h"
#include "reports/peer_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <optional>

namespace ncclwatch::report {
namespace {

// The native stack of a rank's thread that issued the stalled op: its innermost frames.
void print_native_stack(const RankProgress& r) {
  constexpr size_t kFramesShown = 12;
  if (!r.native_tid) return;
  if (r.native_stack.empty()) {
    print_text("  native: rank {} thread {}: not read ({})\n", r.rank, r.native_tid, r.native_unread);
    return;
  }
  print_text("  native: rank {} thread {} (stacks written at a {}; scanned, not unwound: a stale frame may show):\n",
             r.rank, r.native_tid, r.stacks_reason);
  for (size_t i = 0; i < r.native_stack.size() && i < kFramesShown; ++i)
    print_text("    #{} {}\n", i, r.native_stack[i]);
  if (r.native_stack.size() > kFramesShown)
    print_text("    ... {} more frame(s) (see --json)\n", r.native_stack.size() - kFramesShown);
}


using nlohmann::json;

constexpr size_t kMaxMismatchesShown = 20;  // in text output; JSON lists them all
constexpr size_t kMaxAbsentListed = 256;    // ranks in "absent_ranks"; "absent_ranges" holds them all

// The first `limit` ranks the ranges hold.
std::vector<int32_t> first_ranks(const std::vector<RankRange>& ranges, size_t limit) {
  std::vector<int32_t> out;
  for (const RankRange& r : ranges)
    for (int32_t rank = r.first; rank <= r.last && out.size() < limit; ++rank) out.push_back(rank);
  return out;
}

json to_json(const ArgumentMismatch& m) {
  return {{"seq", m.seq},
          {"field", m.field},
          {"expected", m.expected},
          {"value", m.value},
          {"ranks", m.ranks},
          {"expected_ranks", m.expected_ranks.size() <= 64 ? json(m.expected_ranks) : json(m.expected_ranks.size())}};
}

json to_json(const StragglerStats& s) {
  json out = {{"ranks", json::array()}, {"worst", json::array()}, {"measured_on", s.on_gpu ? "gpu_start" : "host_enqueue"},
              {"seqs_judged", s.seqs_judged}};
  for (const LateArrival& w : s.worst) out["worst"].push_back({{"seq", w.seq}, {"rank", w.rank}, {"late_ms", w.late_ms}});
  for (const StragglerRank& r : s.ranks) {
    json entry = {{"rank", r.rank}, {"times_last", r.times_last}, {"expected_by_chance", r.expected_by_chance},
                  {"typical_late_ms", r.typical_late_ms}, {"mean_late_ms", r.mean_late_ms},
                  {"far_more_than_chance", r.far_more_than_chance}, {"finding", r.finding}};
    if (r.finding) entry["text"] = r.text;
    if (r.offset_by_comm) {
      entry["offset_by_comm"] = hex_id(r.offset_by_comm);
      entry["withdrawn"] = r.text;
    }
    out["ranks"].push_back(std::move(entry));
  }
  if (!s.on_gpu && s.seqs_judged)
    out["note"] = "no collective of this communicator was GPU-timed on every rank: host enqueue times cannot "
                  "say who was late (set NCCLWATCH_TIMING=gpu)";
  return out;
}

json to_json(const Divergence& d) {
  json e = {{"rank", d.rank}, {"from_seq", d.from_seq}, {"to_seq", d.to_seq}, {"reason", d.reason},
            {"reference_rank", d.reference_rank}, {"departed", d.departed}};
  if (d.likely_seq) e["likely_seq"] = d.likely_seq;
  if (d.other_comm) {
    e["other_comm"] = hex_id(d.other_comm);
    e["other_from_seq"] = d.other_from_seq;
    e["other_to_seq"] = d.other_to_seq;
  }
  return e;
}

json to_json(const CommHang& c) {
  json absent = json::array();
  for (const RankRange& r : c.absent) absent.push_back({r.first, r.last});
  json j = {{"comm", hex_id(c.comm_id)},
            {"nranks", c.nranks},
            {"ranks", c.ranks},
            {"absent_ranks", first_ranks(c.absent, kMaxAbsentListed)},
            {"absent_count", rank_count(c.absent)},
            {"absent_ranges", absent},
            {"last_seq_issued", c.last_seq_issued},
            {"init_never_returned", c.init_never_returned},
            {"last_seq_completed_by_all", c.last_seq_completed_by_all},
            {"missing", json::array()},
            {"incomplete", json::array()},
            {"per_rank", json::array()},
            {"mismatches", json::array()},
            {"mismatched_seqs", c.mismatched_seqs},
            {"stalls", json::array()},
            {"stall_records", c.stall_records},
            {"p2p_unmatched", json::array()},
            {"stragglers", to_json(c.stragglers)},
            {"divergence", json::array()},
            {"verdict", c.verdict}};
  if (!c.name.empty()) j["name"] = c.name;
  if (c.slow_peer) j["slow_peer"] = report::to_json(*c.slow_peer);
  // A seq a CUDA graph launch ran: "graph" (its index in the issuing rank's trace) and "replay".
  auto with_replay = [&](json e, uint64_t seq) {
    if (auto it = c.graph_replays.find(seq); it != c.graph_replays.end()) {
      e["graph"] = it->second.graph;
      if (it->second.replay) e["replay"] = it->second.replay;
    }
    return e;
  };
  // Where a rank's Python was: "where" (its program line), "python_stack" (the main thread's frames).
  auto with_where = [](json e, const RankProgress& r) {
    if (r.native_tid) {
      e["native_tid"] = r.native_tid;
      if (!r.native_stack.empty()) e["native_stack"] = r.native_stack;
      if (!r.native_unread.empty()) e["native_unread"] = r.native_unread;
      e["stacks_reason"] = r.stacks_reason;
    }
    if (r.where.empty()) return e;
    e["where"] = r.where;
    e["stacks_reason"] = r.stacks_reason;
    json frames = json::array();
    for (const PythonFrame& f : r.python_stack) frames.push_back({{"file", f.file}, {"line", f.line}, {"function", f.function}});
    e["python_stack"] = std::move(frames);
    return e;
  };
  for (const MissingRank& m : c.missing)
    j["missing"].push_back(with_where(with_replay({{"rank", m.rank}, {"first_missing_seq", m.last_seq + 1},
                                                   {"last_seq", m.last_seq}, {"host", m.host}, {"pid", m.pid},
                                                   {"process_ended", m.process_ended}},
                                                  m.last_seq + 1),
                                      m));
  for (const IncompleteRank& r : c.incomplete)
    j["incomplete"].push_back(with_replay({{"rank", r.rank}, {"from_seq", r.from_seq}, {"to_seq", r.to_seq}}, r.from_seq));
  for (const RankProgress& r : c.per_rank)
    j["per_rank"].push_back(with_where({{"rank", r.rank}, {"host", r.host}, {"pid", r.pid}, {"last_seq", r.last_seq},
                                        {"completed_seq", r.completed_seq}, {"process_ended", r.process_ended}},
                                       r));
  for (const ArgumentMismatch& m : c.mismatches) j["mismatches"].push_back(to_json(m));
  if (c.mismatches_not_detailed) j["mismatches_not_detailed"] = c.mismatches_not_detailed;
  for (const StallSeen& s : c.stalls)
    j["stalls"].push_back(with_replay({{"rank", s.rank}, {"seq", s.seq}, {"op", trace::api_name(s.op)},
                                       {"state", s.stalled ? "stalled" : "resolved"}, {"pending_s", s.pending_s},
                                       {"time_ns", s.time_ns}},
                                      s.seq));
  for (const UnmatchedP2P& p : c.p2p_unmatched)
    j["p2p_unmatched"].push_back({{"src", p.src}, {"dst", p.dst}, {"sends", p.sends}, {"recvs", p.recvs}});
  for (const Divergence& d : c.divergence) j["divergence"].push_back(to_json(d));
  return j;
}

// "rank 1 departed from its peers' program (likely at seq 7): <reason>"
std::string divergence_text(const Divergence& d) {
  return fmt::format("rank {} departed from its peers' program{}: {}", d.rank,
                     d.likely_seq ? fmt::format(" (likely at seq {})", d.likely_seq) : "", d.reason);
}

// One row per finding, as the hang report holds them, for a spreadsheet to filter and count. The
// seqs a finding concerns are two numeric columns (equal for one seq, empty where no seq applies)
// rather than one "6..10" text, so that they sort and filter as numbers; ranks are written in full
// ("0,4-63"), never cut short as on screen.
void write_hang_csv(const HangReport& report) {
  constexpr size_t kAll = SIZE_MAX;
  write_csv_row({"comm", "name", "finding", "first_seq", "last_seq", "ranks", "detail"});
  for (const CommHang& c : report.comms) {
    auto row = [&](const char* finding, std::optional<uint64_t> first_seq, std::optional<uint64_t> last_seq,
                   const std::string& ranks, const std::string& detail) {
      write_csv_row({hex_id(c.comm_id), c.name, finding, first_seq ? std::to_string(*first_seq) : "",
                     last_seq ? std::to_string(*last_seq) : "", ranks, detail});
    };
    if (uint64_t n = rank_count(c.absent))
      row("absent_rank", {}, {}, ranges_text(c.absent, kAll),
          fmt::format("{} of {} rank(s) left no trace file; their state is unknown", n, c.nranks));
    if (!c.init_never_returned.empty()) {
      std::string ranks = ranks_text(c.init_never_returned, kAll);
      row("init_never_returned", {}, {}, ranks, fmt::format("rank(s) {} entered the creation call and never returned", ranks));
    }
    for (const MissingRank& m : c.missing)
      row("missing_rank", m.last_seq + 1, m.last_seq + 1, std::to_string(m.rank),
          fmt::format("rank {} never issued seq {}{} (last issued {}{})", m.rank, m.last_seq + 1,
                      graph_replay_note(c, m.last_seq + 1), m.last_seq, m.process_ended ? ", its process exited" : ""));
    for (const IncompleteRank& r : c.incomplete)
      row("never_completed", r.from_seq, r.to_seq, std::to_string(r.rank),
          fmt::format("rank {} issued seqs {}..{}{}, which never completed", r.rank, r.from_seq, r.to_seq,
                      graph_replay_note(c, r.from_seq)));
    for (const ArgumentMismatch& m : c.mismatches) {
      std::string ranks = ranks_text(m.ranks, kAll);
      row("mismatch", m.seq, m.seq, ranks,
          fmt::format("rank(s) {} passed {} {} where the others passed {}", ranks, m.field, dump_json(m.value),
                      dump_json(m.expected)));
    }
    if (c.mismatches_not_detailed)
      row("mismatch_not_detailed", {}, {}, "", fmt::format("{} more mismatched seq(s), not detailed", c.mismatches_not_detailed));
    for (const Divergence& d : c.divergence) row("divergence", d.from_seq, d.to_seq, std::to_string(d.rank), divergence_text(d));
    for (const StallSeen& s : c.stalls)
      row("stall", s.seq, s.seq, std::to_string(s.rank),
          fmt::format("{}{} {} after {:.1f} s", trace::api_name(s.op), graph_replay_note(c, s.seq),
                      s.stalled ? "stalled" : "resolved", s.pending_s));
    for (const UnmatchedP2P& p : c.p2p_unmatched)
      row("p2p_unmatched", {}, {}, ranks_text({std::min(p.src, p.dst), std::max(p.src, p.dst)}, kAll),
          fmt::format("rank {} sent {} time(s) to rank {}, which received {}", p.src, p.sends, p.dst, p.recvs));
    for (const StragglerRank& r : c.stragglers.ranks)
      if (r.finding) row("straggler", {}, {}, std::to_string(r.rank), r.text);
    if (c.slow_peer) row("slow_peer", {}, {}, std::to_string(c.slow_peer->rank), c.slow_peer_text);
  }
  // Not a communicator's: a setting or NCCL version that differs across the job's processes.
  for (const EnvironmentDifference& e : report.environment) {
    std::string values;
    for (const EnvironmentDifference::Value& v : e.values)
      values += fmt::format("{}{} in {} process(es), rank(s) {}", values.empty() ? "" : "; ", v.value, v.processes,
                            ranks_text(v.ranks, kAll));
    write_csv_row({"", "", "environment", "", "", "", fmt::format("{} differs: {}", e.key, values)});
  }
}

void print_hang_text(const HangReport& report) {
  print_text("verdict: {}\n", report.verdict);
  if (report.window.partial()) print_text("judged on the ops kept: {}\n", report.window.text());
  for (const CommHang& c : report.comms) {
    print_text("\ncomm {}{} ({} ranks): last seq issued {}, completed by every rank {}\n", hex_id(c.comm_id),
               c.name.empty() ? "" : " \"" + c.name + "\"", c.nranks, c.last_seq_issued, c.last_seq_completed_by_all);
    if (uint64_t n = rank_count(c.absent)) print_text("  absent (no trace): {} rank(s): {}\n", n, ranges_text(c.absent));
    if (!c.init_never_returned.empty())
      print_text("  creation never returned: rank(s) {}\n", ranks_text(c.init_never_returned));
    for (const MissingRank& m : c.missing)
      print_text("  missing: rank {} never issued seq {}{} (last issued {}{}){}\n", m.rank, m.last_seq + 1,
                 graph_replay_note(c, m.last_seq + 1), m.last_seq, m.process_ended ? ", process exited" : "", where_note(m));
    for (const IncompleteRank& r : c.incomplete)
      print_text("  never completed: rank {} seqs {}..{}{}\n", r.rank, r.from_seq, r.to_seq, graph_replay_note(c, r.from_seq));
    for (const RankProgress& r : c.per_rank)
      if (!r.where.empty()) print_text("  python: rank {} at {} (stacks written at a {})\n", r.rank, r.where, r.stacks_reason);
    for (const RankProgress& r : c.per_rank) print_native_stack(r);
    size_t shown = 0;
    for (const ArgumentMismatch& m : c.mismatches) {
      if (shown++ == kMaxMismatchesShown) {
        print_text("  ... {} more mismatch(es) (see --json)\n", c.mismatches.size() - kMaxMismatchesShown);
        break;
      }
      print_text("  mismatch at seq {}: {} {} on rank(s) {}, {} on the others\n", m.seq, m.field, dump_json(m.value),
                 dump_json(m.ranks), dump_json(m.expected));
    }
    for (const Divergence& d : c.divergence)
      print_text("  divergence: rank {} within seqs {}..{}: {}\n", d.rank, d.from_seq, d.to_seq, d.reason);
    for (const StallSeen& s : c.stalls)
      print_text("  stall: rank {} {} seq {}{} {} after {:.1f} s\n", s.rank, trace::api_name(s.op), s.seq,
                 graph_replay_note(c, s.seq), s.stalled ? "stalled" : "resolved", s.pending_s);
    for (const UnmatchedP2P& p : c.p2p_unmatched)
      print_text("  p2p: rank {} sent {} time(s) to rank {}, which received {}\n", p.src, p.sends, p.dst, p.recvs);
    for (const StragglerRank& r : c.stragglers.ranks)
      if (r.finding)
        print_text("  straggler: rank {} started last on the GPU {} time(s) (chance: {:.0f}), typically {:.3f} ms late "
                   "(mean {:.3f} ms)\n",
                   r.rank, r.times_last, r.expected_by_chance, r.typical_late_ms, r.mean_late_ms);
    if (c.slow_peer) print_text("  slow peer: {}\n", c.slow_peer_text);
    print_text("  verdict: {}\n", c.verdict);
  }
  for (const EnvironmentDifference& e : report.environment) {
    print_text("\nenvironment differs: {}\n", e.key);
    for (const EnvironmentDifference::Value& v : e.values)
      print_text("  {} on {} process(es), ranks {}\n", v.value, v.processes, json(v.ranks).dump());
  }
}

// The hang report's JSON but the communicators' entries.
json head_json(const HangReport& report) {
  return {{"traces", report.traces},
          {"environment", report::to_json(report.environment)},
          {"clock", {{"method", report.clock_method}, {"hosts", report.clock_hosts}}},
          {"verdict", report.verdict},
          {"window", report.window.to_json()}};
}

}  // namespace

json to_json(const std::vector<EnvironmentDifference>& differences) {
  json out = json::array();
  for (const EnvironmentDifference& d : differences) {
    json entry = {{"key", d.key}, {"values", json::array()}};
    for (const EnvironmentDifference::Value& v : d.values)
      entry["values"].push_back({{"value", v.value}, {"ranks", v.ranks}, {"processes", v.processes}});
    out.push_back(std::move(entry));
  }
  return out;
}

json to_json(const HangReport& report) {
  json comms = json::array();
  for (const CommHang& c : report.comms) comms.push_back(to_json(c));
  json out = head_json(report);
  out["comms"] = std::move(comms);  // moved in: a braced list would copy every communicator's entry
  return out;
}

int run_hang(const Options& options) {
  std::optional<JobAnalysis> analysis = load_job_or_explain(options.inputs, AnalysisOptions{});
  if (!analysis) return kNoUsableInput;
  HangReport report = hang_report(*analysis);
  if (options.json) {
    // to_json(report), written one communicator at a time
    write_json_streamed(std::cout, head_json(report),
                        {{"comms", report.comms.size(), [&](size_t i) { return to_json(report.comms[i]); }}});
    std::cout << "\n";
  } else if (options.csv) {
    write_hang_csv(report);
  } else {
    print_hang_text(report);
  }
  return report.findings ? 1 : 0;
}

}  // namespace ncclwatch::report
