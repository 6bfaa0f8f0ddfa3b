// peers: what NCCL's proxy moved to and from each peer over the network (peer_links.h), per
// communicator, rank, peer and direction, as JSON, CSV and text; and the peer the others waited on.
// Exit 1 when a communicator has one.
#include "reports/column_table.h"
#include "reports/commands.h"
#include "reports/input.h"
#include "reports/peer_table.h"

#include <fmt/format.h>

#include <iostream>

namespace ncclwatch::report {
namespace {

using nlohmann::json;
using Row = PeerRow;

Cell count(uint64_t v) { return v; }

const Column<Row> kPeerColumns[] = {
    {.json = "comm", .csv = "comm", .text = "comm", .width = -16, .value = [](const Row& r) -> Cell { return hex_id(r.key.comm_id); },
     .shown = [](const Row& r) -> Cell { return r.name.empty() ? hex_id(r.key.comm_id) : r.name; }},
    {.json = "name", .value = [](const Row& r) -> Cell { return r.name; }, .json_if_empty = false},
    {.json = "nranks", .csv = "nranks", .text = "ranks", .width = 6, .value = [](const Row& r) -> Cell { return int64_t{r.link.nranks}; }},
    {.json = "rank", .csv = "rank", .text = "rank", .width = 5, .value = [](const Row& r) -> Cell { return int64_t{r.key.rank}; }},
    {.json = "direction", .csv = "direction", .text = "dir", .width = 5,
     .value = [](const Row& r) -> Cell { return std::string(r.key.send ? "send" : "recv"); },
     .shown = [](const Row& r) -> Cell { return std::string(r.key.send ? "->" : "<-"); }},
    {.json = "peer", .csv = "peer", .text = "peer", .width = 5, .value = [](const Row& r) -> Cell { return int64_t{r.key.remote}; }},
    {.json = "transport", .csv = "transport", .value = [](const Row&) -> Cell { return std::string("network"); }},
    {.json = "operations", .csv = "operations", .text = "ops", .width = 8, .value = [](const Row& r) { return count(r.link.operations); }},
    {.json = "steps", .csv = "steps", .text = "steps", .width = 8, .value = [](const Row& r) { return count(r.link.steps); }},
    {.json = "bytes", .csv = "bytes", .value = [](const Row& r) { return count(r.link.bytes); }},
    {.text = "MiB", .width = 10, .value = [](const Row& r) -> Cell { return double(r.link.bytes) / 1048576.0; }},
    {.json = "send_gbps", .csv = "send_gbps", .text = "GB/s", .width = 7, .text_decimals = 2,
     .value = [](const Row& r) -> Cell {
       if (!r.key.send || r.link.moving_ns == 0) return std::monostate{};
       return r.link.send_gbps();
     }},
    {.json = "peer_wait_us_per_step", .csv = "peer_wait_us_per_step", .text = "peer wait us/step", .width = 18,
     .value = [](const Row& r) -> Cell { return r.link.peer_wait_us_per_step(); }},
    {.json = "gpu_wait_us_per_step", .csv = "gpu_wait_us_per_step", .text = "gpu wait us/step", .width = 17,
     .value = [](const Row& r) -> Cell { return r.link.steps ? r.link.gpu_wait_ns / 1e3 / double(r.link.steps) : 0.0; }},
    {.json = "step_us", .csv = "step_us", .text = "step us", .width = 9,
     .value = [](const Row& r) -> Cell { return r.link.steps ? r.link.step_ns / 1e3 / double(r.link.steps) : 0.0; }},
    {.json = "partial_operations", .csv = "partial_operations", .value = [](const Row& r) { return count(r.link.partial); }},
};

}  // namespace

json to_json(const SlowPeer& s) {
  return {{"comm", hex_id(s.comm_id)},
          {"rank", s.rank},
          {"nranks", s.nranks},
          {"own_recv_wait_us_per_step", s.own_wait_us},
          {"others_recv_wait_us_per_step", s.others_us},
          {"step_us", s.step_us},
          {"others_step_us", s.others_step_us},
          {"waiting_ranks", s.waiting},
          {"steps", s.steps}};
}

std::vector<PeerRow> peer_rows(const JobAnalysis& a) {
  std::map<uint64_t, std::string> names = comm_names(a.job);
  std::vector<PeerRow> rows;
  for (const auto& [key, link] : a.peers) {
    auto name = names.find(key.comm_id);
    rows.push_back({key, link, name == names.end() ? "" : name->second});
  }
  return rows;
}

int run_peers(const Options& options) {
  AnalysisOptions ao;
  ao.align_clocks = false;
  std::optional<JobAnalysis> analysis = load_job_or_explain(options.inputs, ao);
  if (!analysis) return kNoUsableInput;
  std::vector<PeerRow> rows = peer_rows(*analysis);
  std::vector<SlowPeer> slow = slow_peers(analysis->peers);
  if (options.json) {
    json links = json::array(), named = json::array();
    for (const PeerRow& r : rows) links.push_back(json_of<PeerRow>(kPeerColumns, r));
    for (const SlowPeer& s : slow) named.push_back(to_json(s));
    std::cout << dump_json(json{{"links", links}, {"slow_peers", named}}, 2) << "\n";
  } else if (options.csv) {
    write_csv<PeerRow>(kPeerColumns, rows);
  } else if (rows.empty()) {
    print_text("no proxy steps in these traces: NCCLWATCH_PROFILER=peers (or all) records them, for NCCL's network "
               "transport only (P2P/NVLink and shared memory have none)\n");
  } else {
    fmt::print("{}", text_table<PeerRow>(kPeerColumns, rows));
    print_text("network transport (NCCL reports proxy steps for it alone); GB/s: what a rank's sends to the peer moved "
               "while moving, from each operation's first step's data ready for the network to its end, channels together "
               "(NCCL starts proxy operations as ops are enqueued, long before their data moves); "
               "peer wait: send steps waiting for the peer's buffer and the network, receive steps for the peer's data\n");
    std::map<uint64_t, std::string> names = comm_names(analysis->job);
    for (const SlowPeer& s : slow) print_text("SLOW PEER: {}\n", slow_peer_text(s, comm_label(s.comm_id, names)));
  }
  return slow.empty() ? 0 : 1;
}

}  // namespace ncclwatch::report
