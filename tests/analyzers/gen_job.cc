// Writes the traces of one synthetic job: gen_job SCENARIO DIR. The scenarios are the jobs the
// analyzer tests ask about (see test_reports.py). `gen_job many_comms DIR COMMS [RANKS]` writes a
// job of COMMS communicators for the scaling benchmark (tests/bench/many_comms.py); `gen_job fleet
// DIR INDEX` one job of a fleet (test_export.py).
#include "synthetic_trace.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <string>

using namespace ncclwatch;
using namespace ncclwatch::testing;

namespace {

// World all-reduces every step; a side communicator all-reduces after every 5th step. `skipper`
// skips its `skipped`-th world all-reduce (its compute for that step still happens).
SimJob interleaved(int nranks, int steps, int skipper, int skipped) {
  SimJob job;
  SimComm world{0xA11CE00000000001ull, "world", {}};
  SimComm side{0x51DE000000000002ull, "side", {}};
  for (int r = 0; r < nranks; ++r) world.members.push_back(r), side.members.push_back(r);
  job.comms = {world, side};
  for (int r = 0; r < nranks; ++r) {
    SimRank rank;
    rank.pid = 2000 + static_cast<uint32_t>(r);
    int64_t carried = 0;
    for (int step = 1; step <= steps; ++step) {
      if (r == skipper && step == skipped) {
        carried += 1000000;  // the step's compute, with no collective after it
      } else {
        SimCall c;
        c.delay_ns = 1000000 + carried;
        carried = 0;
        rank.program.push_back(c);
      }
      if (step % 5 == 0) {
        SimCall s;
        s.comm = 1;
        s.count = 1024;
        s.delay_ns = 50000;
        rank.program.push_back(s);
      }
    }
    job.ranks.push_back(rank);
  }
  return job;
}

SimJob fleet_scale_job(int stops, int late) {
  SimJob job = world_job(4096, 24);
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    job.ranks[r].host = "node" + std::to_string(r / 8);
    job.ranks[r].pid = 10000 + static_cast<uint32_t>(r);
    job.ranks[r].env["NCCLWATCH_JOB"] = stops >= 0 ? "ranks4096-hang" : "ranks4096-straggler";
  }
  if (stops >= 0) {
    job.ranks[static_cast<size_t>(stops)].program.resize(12);
    job.ranks[static_cast<size_t>(stops)].exits = false;
  }
  if (late >= 0)
    for (SimCall& c : job.ranks[static_cast<size_t>(late)].program) c.delay_ns += 20'000'000;
  return job;
}

const std::map<std::string, std::function<SimJob()>> kScenarios = {
    // Rank 1 passes half the count at seq 3 and dies after seq 5; the others hang at seq 6.
    {"count_mismatch_then_stop",
     [] {
       SimJob job = world_job(4, 10);
       job.ranks[1].program[2].count = 1 << 19;
       job.ranks[1].program.resize(5);
       job.ranks[1].exits = false;
       return job;
     }},
    // Rank 1 all-reduces half the elements at step 4 (and at step 9); everyone completes and exits.
    {"silent_mismatch",
     [] {
       SimJob job = world_job(2, 12);
       job.ranks[1].program[3].count = 1 << 19;
       job.ranks[1].program[8].datatype = 9;  // bfloat16 instead of float32
       return job;
     }},
    {"skip_interleaved_4", [] { return interleaved(4, 30, 1, 7); }},
    {"skip_interleaved_2", [] { return interleaved(2, 30, 1, 7); }},
    // Rank 2 sleeps 5 ms before every collective. Ranks 2 and 3 are on another host whose wall
    // clock is 37 ms ahead: aligned, rank 2 alone is late.
    {"straggler",
     [] {
       SimJob job = world_job(4, 60);
       for (int r : {2, 3}) job.ranks[static_cast<size_t>(r)].host = "node1";
       job.wall_skew_ns["node1"] = 37'000'000;
       job.mono_base_ns["node1"] = 123'456'789'000;
       for (SimCall& c : job.ranks[2].program) c.delay_ns += 5'000'000;
       return job;
     }},
    // A healthy job: mixed sizes, all-gathers, a broadcast.
    {"clean",
     [] {
       SimJob job = world_job(2, 0);
       for (SimRank& rank : job.ranks) {
         for (int i = 0; i < 8; ++i) {
           SimCall c;
           c.count = 1 << 20;
           rank.program.push_back(c);
           c.count = 1 << 10;
           rank.program.push_back(c);
         }
         SimCall g;
         g.api = trace::Api::kAllGather;
         g.count = 1 << 18;
         g.redop = -1;
         rank.program.push_back(g);
         SimCall b;
         b.api = trace::Api::kBroadcast;
         b.count = 1 << 16;
         b.redop = -1;
         b.peer = 0;
         rank.program.push_back(b);
       }
       return job;
     }},
    // Ranks run different NCCL versions and NCCL_ALGO settings; nothing else is wrong. Each
    // claims a host of its own (NCCL_HOSTID), as such settings are meant to differ.
    {"env_diff",
     [] {
       SimJob job = world_job(3, 4);
       job.ranks[2].nccl_version = "2.21.5";
       job.ranks[1].env["NCCL_ALGO"] = "Tree";
       for (size_t r = 0; r < job.ranks.size(); ++r) job.ranks[r].env["NCCL_HOSTID"] = "host" + std::to_string(r);
       return job;
     }},
    // For `advice`: 4 ranks on two hosts with settings that cost (InfiniBand off across hosts, a
    // 64 KiB buffer, a log line per call, PyTorch's watchdog off) and one that costs nothing here
    // (NCCL_IB_DISABLE on a job of one host is the next scenario).
    {"costly_settings",
     [] {
       SimJob job = world_job(4, 4);
       for (size_t r = 0; r < job.ranks.size(); ++r) {
         SimRank& rank = job.ranks[r];
         rank.host = "node" + std::to_string(r / 2);
         rank.env["NCCL_IB_DISABLE"] = "1";
         rank.env["NCCL_BUFFSIZE"] = "65536";
         rank.env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0";
         if (r == 3) {
           rank.env["NCCL_DEBUG"] = "INFO";
           rank.env["NCCL_DEBUG_SUBSYS"] = "INIT,COLL";
         }
       }
       return job;
     }},
    {"one_host_settings",
     [] {
       SimJob job = world_job(2, 4);
       for (SimRank& rank : job.ranks) {
         rank.env["NCCL_IB_DISABLE"] = "1";
         rank.env["NCCL_BUFFSIZE"] = "4194304";
         rank.env["NCCL_DEBUG"] = "INFO";
         rank.env["NCCL_DEBUG_SUBSYS"] = "INIT";
       }
       return job;
     }},
    // For the html report: 8 ranks, all-reduces and all-gathers of several sizes on "world", a
    // 4-rank communicator whose name is hostile markup, rank 5 late by 3 ms before every world op,
    // and rank 6 ending without destroying its communicators (no final record: killed).
    {"html_demo",
     [] {
       SimJob job = world_job(8, 0);
       SimComm hostile{0x7E57000000000003ull, "tp<script>alert(\"x&y\")</script>'\u00fc", {0, 1, 2, 3}};
       job.comms.push_back(hostile);
       for (size_t r = 0; r < job.ranks.size(); ++r) {
         SimRank& rank = job.ranks[r];
         for (int exponent = 8; exponent <= 22; exponent += 2)
           for (int i = 0; i < 4; ++i) {
             SimCall c;
             c.count = uint64_t{1} << exponent;
             c.delay_ns = r == 5 ? 4'000'000 : 1'000'000;
             rank.program.push_back(c);
           }
         for (int exponent : {12, 16, 20})
           for (int i = 0; i < 3; ++i) {
             SimCall g;
             g.api = trace::Api::kAllGather;
             g.count = uint64_t{1} << exponent;
             g.redop = -1;
             g.delay_ns = r == 5 ? 4'000'000 : 1'000'000;
             rank.program.push_back(g);
           }
         if (r < 4)
           for (int exponent : {10, 18})
             for (int i = 0; i < 3; ++i) {
               SimCall t;
               t.comm = 1;
               t.count = uint64_t{1} << exponent;
               rank.program.push_back(t);
             }
       }
       job.ranks[6].exits = false;
       return job;
     }},
    // 70 ranks, 250 all-reduces: more ranks and seqs than the html report's heatmap shows; rank 67
    // starts 3 ms late every time.
    {"wide_straggler",
     [] {
       SimJob job = world_job(70, 250, 1 << 16);
       for (SimCall& c : job.ranks[67].program) c.delay_ns += 3'000'000;
       return job;
     }},
    // A job at fleet scale (the Prometheus rules' test): 4,096 ranks, 8 per host, 24 all-reduces of
    // 1 MiB. In the hang, rank 1234 stops after 12 (still running, inside nothing); in the straggler,
    // rank 777 starts every all-reduce 20 ms late.
    {"ranks4096_hang", [] { return fleet_scale_job(1234, 0); }},
    {"ranks4096_straggler", [] { return fleet_scale_job(-1, 777); }},
    // Host timing only (no GPU timing records).
    {"host_timing",
     [] {
       SimJob job = world_job(2, 10);
       for (SimRank& r : job.ranks) r.timed = false;
       return job;
     }},
};

// RANKS processes that each make COMMS communicators spanning all of them (unique handles), register
// a buffer on each and all-reduce once on each (rank 0 twice on every 1000th: the others never issue
// its seq 2), then destroy them in the order made, as a framework's teardown does, except every
// 100th (leaked, its registration with it). Written directly rather than through the simulator: it
// is one pass over a large job.
void write_many_comms(const std::string& dir, uint32_t comms, int ranks) {
  std::filesystem::create_directories(dir);
  constexpr int64_t kEpoch = 1'700'000'000'000'000'000;
  constexpr int64_t kStart = 1'000'000'000;
  auto handle = [](uint32_t i) { return 0x7f0000000000ull + uint64_t{i} * 0x1000; };
  auto comm_id = [](uint32_t i) { return 0xC033000000000000ull + i; };
  auto leaked = [](uint32_t i) { return i % 100 == 7; };
  for (int r = 0; r < ranks; ++r) {
    uint32_t pid = 3000 + static_cast<uint32_t>(r);
    TraceFileWriter w(dir + "/node0-" + std::to_string(pid) + "-1.nwt", "node0", pid, kEpoch + kStart, kStart);
    w.strings(trace::RecordType::kProcess, kStart, {"host=node0", "pid=" + std::to_string(pid)});
    w.strings(trace::RecordType::kLibrary, kStart, {"path=/usr/lib/libnccl.so.2", "version=22809"});
    int64_t t = kStart + 1'000'000;
    uint64_t call_id = 0;
    auto call = [&](trace::Api api, uint32_t i, uint64_t comm, uint64_t resource) {
      trace::ApiEvent e{};
      e.call_id = ++call_id;
      e.time_ns = t;
      e.tid = pid;
      e.api = static_cast<uint16_t>(api);
      e.comm_id = comm_id(i);
      e.rank = r;
      e.nranks = ranks;
      e.resource = resource;
      e.bytes = resource ? 1 << 20 : 0;
      w.call(trace::RecordType::kCallBegin, e);
      e.time_ns = t += 20'000;
      e.comm = comm;
      w.call(trace::RecordType::kCallEnd, e);
      t += 10'000;
    };
    uint64_t launch_id = 0;
    auto all_reduce = [&](uint32_t i, uint64_t seq) {
      trace::OpRecord o{};
      o.comm_id = comm_id(i);
      o.comm = handle(i);
      o.seq = seq;
      o.count = 1 << 16;
      o.stream = 0x5000;
      o.host_begin_ns = t;
      o.host_end_ns = t + 4000;
      o.launch_id = ++launch_id;
      o.tid = pid;
      o.api = static_cast<uint16_t>(trace::Api::kAllReduce);
      o.peer = -1;
      o.rank = r;
      o.nranks = ranks;
      o.datatype = 7;
      o.flags = trace::kOpTimed;
      w.op(o);
      trace::GpuTimingRecord g{};
      g.launch_id = o.launch_id;
      g.stream = o.stream;
      g.gpu_begin_ns = t + 5000;
      g.gpu_end_ns = t + 25000;
      g.ops = 1;
      g.flags = trace::kTimingHasBegin;
      w.timing(g);
      t += 30'000;
    };
    for (uint32_t i = 0; i < comms; ++i) {
      call(trace::Api::kCommInitRank, i, handle(i), 0);
      call(trace::Api::kCommRegister, i, handle(i), 0x7e0000000000ull + uint64_t{i} * 0x100000);
      all_reduce(i, 1);
      if (r == 0 && i % 1000 == 500) all_reduce(i, 2);
    }
    for (uint32_t i = 0; i < comms; ++i)
      if (!leaked(i)) call(trace::Api::kCommDestroy, i, handle(i), 0);
    trace::ExitRecord x{};
    x.time_ns = t;
    x.reason = static_cast<uint32_t>(trace::ExitReason::kNormal);
    w.exit(trace::RecordType::kExitBegin, x);
    w.exit(trace::RecordType::kProcessEnd, x);
  }
}

// Job `index` of a fleet (the export's test: one host late in most jobs): 8 ranks on hosts node0..3,
// two each, all-reduces of two sizes; NCCL 2.27.7 in even jobs, 2.28.9 in odd ones. In 7 jobs of 10
// node2's first rank starts 3 ms late at every collective; in the others a host picked by the
// index is. node0's wall clock is 6 ms ahead: unaligned, its ranks would look the latest everywhere.
SimJob fleet_job(int index) {
  SimJob job = world_job(8, 0);
  const std::string late = index % 10 < 7 ? "node2" : std::vector<std::string>{"node0", "node1", "node3"}[index % 3];
  for (size_t r = 0; r < job.ranks.size(); ++r) {
    SimRank& rank = job.ranks[r];
    rank.host = "node" + std::to_string(r / 2);
    rank.pid = 4000 + static_cast<uint32_t>(r);
    rank.env["NCCLWATCH_JOB"] = "fleet-" + std::to_string(index);
    rank.nccl_version = index % 2 ? "22809" : "22707";  // as the shim records it: NCCL_VERSION_CODE
    for (int step = 0; step < 24; ++step) {
      SimCall c;
      c.count = step % 2 ? 1 << 20 : 1 << 16;
      if (rank.host == late && r % 2 == 0) c.delay_ns += 3'000'000;
      rank.program.push_back(c);
    }
  }
  job.wall_skew_ns["node0"] = 6'000'000;
  job.mono_base_ns["node1"] = 77'000'000'000;
  return job;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "fleet") == 0) {
    for (const std::string& path : write_job(fleet_job(std::atoi(argv[3])), argv[2])) std::printf("%s\n", path.c_str());
    return 0;
  }
  if ((argc == 4 || argc == 5) && std::strcmp(argv[1], "many_comms") == 0) {
    write_many_comms(argv[2], static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 10)), argc == 5 ? std::atoi(argv[4]) : 2);
    return 0;
  }
  if (argc != 3 || !kScenarios.count(argv[1])) {
    std::fprintf(stderr, "usage: gen_job SCENARIO DIR | gen_job many_comms DIR COMMS [RANKS] | gen_job fleet DIR INDEX\nscenarios:");
    for (const auto& [name, make] : kScenarios) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  SimJob job = kScenarios.at(argv[1])();
  for (const std::string& path : write_job(job, argv[2])) std::printf("%s\n", path.c_str());
  return 0;
}
