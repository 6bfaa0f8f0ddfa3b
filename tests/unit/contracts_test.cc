// The contracts between the shim and the reports, each defined once in common/ncclwatch/: what the
// shim writes (or decides at exit) read back through the reports' own code, so that a change on
// one side alone fails here.
#include "process/process_info.h"
#include "resolve/library_census.h"
#include "resolve/resolver.h"

#include "model/job_model.h"
#include "reports/reports.h"

#include <ncclwatch/lifecycle_rules.h>
#include <ncclwatch/trace_format.h>
#include <ncclwatch/trace_strings.h>

#include <catch2/catch.hpp>

#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace ncclwatch;
using namespace ncclwatch::trace;

namespace {

// One record as the reader hands it on.
struct Record {
  std::vector<std::byte> bytes;
  RecordType type;
  report::RecordView view() const { return {type, bytes.data(), static_cast<uint32_t>(bytes.size()), 0}; }
};

Record strings_record(RecordType type, const std::string& blob) {
  Record r{std::vector<std::byte>(padded_size(sizeof(StringsRecord) + blob.size())), type};
  auto* rec = reinterpret_cast<StringsRecord*>(r.bytes.data());
  rec->h = {static_cast<uint32_t>(r.bytes.size()), static_cast<uint16_t>(type), kCommitMark};
  rec->bytes = static_cast<uint32_t>(blob.size());
  std::memcpy(r.bytes.data() + sizeof(StringsRecord), blob.data(), blob.size());
  return r;
}

Record api_event(RecordType type, const ApiEvent& event) {
  Record r{std::vector<std::byte>(sizeof(ApiEvent)), type};
  ApiEvent e = event;
  e.h = {static_cast<uint32_t>(sizeof(ApiEvent)), static_cast<uint16_t>(type), kCommitMark};
  std::memcpy(r.bytes.data(), &e, sizeof(e));
  return r;
}

report::ProcessTrace fold(const std::vector<Record>& records) {
  report::ProcessTrace p;
  report::LifecycleFold folder(p);
  for (const Record& r : records) folder.add(r.view());
  std::vector<report::TraceProblem> problems;
  folder.finish(problems);
  return p;
}

ApiEvent call(Api api, uint64_t call_id, uint64_t comm, int result) {
  ApiEvent e{};
  e.call_id = call_id;
  e.time_ns = static_cast<int64_t>(call_id) * 1000;
  e.api = static_cast<uint16_t>(api);
  e.comm = comm;
  e.comm_id = comm;
  e.result = static_cast<int16_t>(result);
  e.rank = 0;
  e.nranks = 1;
  return e;
}

// The end state the reports decide for a communicator made with `init_result`, then released by
// `release` (kUnknown: never) answering `release_result`.
lifecycle::EndState end_state(int init_result, Api release = Api::kUnknown, int release_result = ncclSuccess) {
  std::vector<Record> records = {api_event(RecordType::kCallBegin, call(Api::kCommInitRank, 1, 0, 0)),
                                 api_event(RecordType::kCallEnd, call(Api::kCommInitRank, 1, 0xc0, init_result))};
  if (release != Api::kUnknown) {
    records.push_back(api_event(RecordType::kCallBegin, call(release, 2, 0xc0, 0)));
    records.push_back(api_event(RecordType::kCallEnd, call(release, 2, 0xc0, release_result)));
  }
  report::ProcessTrace p = fold(records);
  REQUIRE(p.comms.size() == 1);
  return p.comms[0].state;
}

std::vector<std::string> remedy_lines(const lifecycle::LeakMakers& makers) {
  lifecycle::Remedies remedies = lifecycle::remedies_for(makers);
  return {remedies.begin(), remedies.end()};
}

}  // namespace

TEST_CASE("the remedy under leaked communicators: NVSHMEM's for its own, then PyTorch's or NCCL's") {
  struct Made {
    bool nvshmem, torch;
    lifecycle::EndState state = lifecycle::EndState::kLeaked;
  };
  struct Case {
    std::vector<Made> leaked;
    std::vector<std::string> remedies;
  };
  const std::string nvshmem = lifecycle::kNvshmemRemedy, torch = lifecycle::kTorchRemedy, nccl = lifecycle::kNcclRemedy,
                    teardown = lifecycle::kTeardownHungRemedy;
  constexpr auto kFinalizeHung = lifecycle::EndState::kFinalizeHung;
  const Case cases[] = {
      {{}, {}},
      {{{false, false}}, {nccl}},
      {{{false, true}, {false, false}}, {torch}},
      {{{true, false}}, {nvshmem}},
      {{{true, true}}, {nvshmem}},  // NVSHMEM inside PyTorch: NVSHMEM's only
      {{{true, false}, {false, false}}, {nvshmem, nccl}},
      {{{true, true}, {false, true}}, {nvshmem, torch}},
      // A teardown that never returned was called: "call destroy_process_group()" is no remedy.
      {{{false, true, kFinalizeHung}}, {teardown}},
      {{{false, true, kFinalizeHung}, {false, false}}, {teardown, nccl}},
  };
  for (const Case& c : cases) {
    lifecycle::LeakMakers makers;
    report::Job job;
    report::ProcessTrace& p = job.processes.emplace_back();
    uint64_t id = 0x100;
    for (const Made& m : c.leaked) {
      makers.add(m.nvshmem, m.torch, m.state);  // as the exit alert adds each leaked communicator
      report::CommInstance& comm = p.comms.emplace_back();
      comm.id = comm.handle = ++id;
      comm.rank = 0;
      comm.nranks = 1;
      comm.created_ns = 1;
      comm.state = m.state;
      comm.nvshmem = m.nvshmem;
      comm.torch = m.torch;
    }
    INFO(c.leaked.size() << " leaked");
    CHECK(remedy_lines(makers) == c.remedies);
    CHECK(report::leak_report(job, false).remedies == c.remedies);
  }
}

TEST_CASE("library records the shim writes read back with their status") {
  RealNccl lib;
  lib.library_id = 2;
  lib.path = "/opt/nccl/libnccl.so.2";
  lib.version = 22809;
  lib.reached = "global scope";
  lib.missing = {"ncclCommShrink", "ncclCommGrow"};
  report::ProcessTrace p = fold({
      strings_record(RecordType::kLibrary, attached_library_strings(lib)),
      strings_record(RecordType::kLibrary, unreached_library_strings("/app/libembedded.so", 22703,
                                                                     library_record::kNotTraced, "hidden symbols")),
      strings_record(RecordType::kLibrary, unreached_library_strings("/opt/other/libnccl.so.2", 22105,
                                                                     library_record::kUnused, "no call reached it")),
  });
  REQUIRE(p.libraries.size() == 3);
  const report::NcclLibrary& attached = p.libraries[0];
  CHECK(attached.attached());
  CHECK(attached.id == 2);
  CHECK(attached.path == lib.path);
  CHECK(attached.version == "22809");
  CHECK(attached.reached == "global scope");
  CHECK(p.libraries[1].not_traced());
  CHECK(p.libraries[1].reason == "hidden symbols");
  CHECK(p.libraries[2].status == library_record::kUnused);
  CHECK_FALSE(p.libraries[2].attached());
  CHECK_FALSE(p.libraries[2].not_traced());
  CHECK(p.nccl_version() == "22809");
  CHECK_FALSE(p.has_several_libraries());

  report::Job job;
  job.processes.push_back(p);
  std::vector<report::UntracedCopy> untraced = report::untraced_copies(job);
  REQUIRE(untraced.size() == 1);
  CHECK(untraced[0].path == "/app/libembedded.so");
  CHECK(untraced[0].reason == "hidden symbols");
}

TEST_CASE("the process record's NCCL variables read back as the reports name them") {
  setenv("NCCL_CONTRACT_TEST", "on=yes", 1);
  report::ProcessTrace p = fold({strings_record(RecordType::kProcess, process_info().as_strings())});
  unsetenv("NCCL_CONTRACT_TEST");
  CHECK(p.strings.at(std::string(process_record::kPid)) == std::to_string(process_info().pid));
  CHECK(p.nccl_env().at("NCCL_CONTRACT_TEST") == "on=yes");
}

TEST_CASE("results: ncclInProgress is no failure, a failed destroy frees nothing, a failed abort does") {
  CHECK(succeeded_or_pending(ncclSuccess));
  CHECK(succeeded_or_pending(ncclInProgress));
  CHECK_FALSE(succeeded_or_pending(ncclInternalError));
  CHECK(end_state(ncclInProgress) == lifecycle::EndState::kLeaked);
  CHECK(end_state(ncclInvalidArgument) == lifecycle::EndState::kInitFailed);

  CHECK(release_frees_comm(Api::kCommDestroy, ncclSuccess));
  CHECK_FALSE(release_frees_comm(Api::kCommDestroy, ncclInternalError));
  CHECK(release_frees_comm(Api::kCommAbort, ncclInternalError));
  CHECK(end_state(ncclSuccess, Api::kCommDestroy, ncclSuccess) == lifecycle::EndState::kDestroyed);
  CHECK(end_state(ncclSuccess, Api::kCommDestroy, ncclInternalError) == lifecycle::EndState::kLeaked);
  CHECK(end_state(ncclSuccess, Api::kCommAbort, ncclInternalError) == lifecycle::EndState::kAborted);
}
