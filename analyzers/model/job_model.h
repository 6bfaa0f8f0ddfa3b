// What the trace files of a job say, folded into communicators and resources with their end
// states. Memory grows with the number of processes, communicators and resources, not records.
#pragma once

#include "model/job_inputs.h"
#include "model/parallel_for.h"
#include "model/python_frames.h"
#include "model/trace_reader.h"

#include <ncclwatch/lifecycle_rules.h>
#include <ncclwatch/trace_strings.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ncclwatch::model {

// End states, as named in the JSON contract: the shim's list (lifecycle_rules.h).
using CommState = lifecycle::EndState;
inline const char* state_name(CommState state) { return lifecycle::end_state_name(state); }
using lifecycle::is_leak;

struct Module {
  uint64_t base;
  std::string path;
  std::string build_id;  // raw bytes; empty when the trace does not say (format < 4, or none)
};

// More GPU memory than any device has (1 PiB): a figure beyond it is no measurement, and is dropped.
inline constexpr uint64_t kMostGpuBytes = uint64_t{1} << 50;
// total += bytes, staying at the largest value rather than wrapping (sums over hostile traces).
inline void add_saturated(uint64_t& total, uint64_t bytes) {
  if (__builtin_add_overflow(total, bytes, &total)) total = UINT64_MAX;
}

// GPU memory a communicator held, as the shim measured it when it was made or released.
struct CommMemoryFigure {
  uint64_t bytes = 0;
  // "ncclCommMemStats" | "process_memory" (this process's own, NVML) | "free_memory_change" (the
  // device's); nullptr: not measured
  const char* from = nullptr;
  bool shared_device = false;  // the device's free memory, while other processes used the GPU: ambiguous

  bool known() const { return from != nullptr; }
  static CommMemoryFigure of(const trace::ApiEvent& end);
};

// What a communicator's memory became after one of its set-up calls, or a suspend or resume
// (trace::MemoryRecord).
struct MemoryReading {
  int64_t time_ns = 0;
  trace::Api api = trace::Api::kUnknown;  // a collective, point-to-point call, group end, suspend or resume
  uint64_t count = 0;
  int32_t peer = -1;
  std::optional<uint64_t> held_bytes;    // NCCL's count after the call
  std::optional<int64_t> taken_bytes;    // what the call took: this process's GPU memory's rise, or the
                                         // device's free memory's fall (negative: gave back)
  bool taken_by_process = false;         // taken_bytes is this process's own figure (NVML)
  bool shared_device = false;            // taken_bytes is the device's, other processes on it: ambiguous

  // A figure of this communicator's own: taken_bytes, unless other processes may have moved it.
  bool taken_is_own() const { return taken_bytes && !shared_device; }
  bool suspends() const { return api == trace::Api::kCommSuspend; }
  bool suspends_or_resumes() const { return suspends() || api == trace::Api::kCommResume; }
};

// What a communicator held from one point of its life on: made, after a reading, released.
struct HeldPoint {
  int64_t time_ns = 0;
  uint64_t held_bytes = 0;
  const MemoryReading* after = nullptr;  // nullptr: when made
  const char* from = nullptr;            // the figure it follows, as CommMemoryFigure::from
};

// One communicator as one process saw it (one rank of it).
struct CommInstance {
  uint64_t handle = 0;
  uint64_t id = 0;
  uint64_t parent_id = 0;
  int rank = -1;
  int nranks = -1;
  int device = -1;
  trace::Api api = trace::Api::kUnknown;
  std::string name;            // config->commName
  int result = 0;              // of the creating call
  bool non_blocking = false;
  bool torch = false;
  bool nvshmem = false;         // NVSHMEM made it (its team communicators)
  int64_t begin_ns = 0;        // creating call entered
  int64_t created_ns = 0;      // ... returned (0: never returned)
  int64_t finalized_ns = 0;
  int64_t finalize_begin_ns = 0;  // ncclCommFinalize entered
  bool finalize_returned = false;
  trace::Api release_api = trace::Api::kUnknown;  // destroy or abort
  int64_t release_begin_ns = 0;
  int64_t release_end_ns = 0;
  int release_result = 0;
  bool release_during_exit = false;
  bool made_during_exit = false;  // by an exit handler, or a thread still running in exit
  bool creation_unrecorded = false;  // known only from the exit's list of live ones (its records were lost)
  std::vector<uint64_t> stack;  // call-site return addresses of the creating call
  std::string site;             // the shim's own reading of the call site (dynamic symbols)
  std::vector<PythonFrame> python_site;  // the Python lines that made it, innermost first
  ProcessGroupName process_group;        // PyTorch's group it was made for, where the shim saw it
  // The name people know it by: its config name, else the description PyTorch gave its process
  // group ("mesh_dp", "default_pg", what new_group(group_desc=...) was given); "" when neither.
  const std::string& known_name() const {
    return !name.empty() || process_group.desc == trace::kUndescribedGroup ? name : process_group.desc;
  }
  std::vector<uint64_t> release_stack;  // ... of the destroy or abort
  std::string release_site;
  std::vector<PythonFrame> release_python_site;
  uint16_t library = 0;         // id of the NCCL library that made it (0: the process's only one)
  CommMemoryFigure memory;      // held when made
  CommMemoryFigure freed;       // given back by its destroy or abort
  std::vector<MemoryReading> readings;  // after its set-up calls, suspends and resumes, in order
  // What it held when made and after each reading: NCCL's count where the reading has it, else the
  // figure before moved by the free memory's fall (a set-up call's rise is others' doing, not its;
  // a suspend's is what it gave back). Empty when its memory at creation is unknown and no reading
  // has NCCL's count.
  std::vector<HeldPoint> held_over_time() const;
  // What it holds as last read (the last of held_over_time).
  CommMemoryFigure held() const;
  // What its set-up calls added to what it held when made (held() - memory), where both are known.
  uint64_t set_up_bytes() const { return held().bytes > memory.bytes ? held().bytes - memory.bytes : 0; }
  size_t set_up_calls() const;
  // Suspended at the end of its trace: its last suspend or resume was a suspend.
  bool suspended() const;
  CommState state = CommState::kLeaked;
  // A teardown that never returned (lifecycle::is_teardown_hang): from its entry to the end of the
  // trace, how long the process had been inside it.
  int64_t teardown_inside_ns = 0;

  trace::Api teardown_api() const {
    if (state == CommState::kFinalizeHung) return trace::Api::kCommFinalize;
    if (state == CommState::kEndedInTeardown)
      return release_begin_ns && !release_end_ns ? release_api : trace::Api::kCommFinalize;
    return lifecycle::is_teardown_hang(state) ? release_api : trace::Api::kUnknown;
  }
};

struct ResourceInstance {
  trace::Api api = trace::Api::kUnknown;  // the acquiring call
  uint64_t handle = 0;
  uint64_t comm = 0;
  uint64_t comm_id = 0;
  int rank = -1;
  uint64_t bytes = 0;
  uint64_t buffer = 0;          // the buffer registered (ncclCommRegister, ncclCommWindowRegister)
  int64_t created_ns = 0;
  int64_t released_ns = 0;      // when released (its own call, or its communicator's destroy)
  bool released = false;
  bool released_with_comm = false;
  std::vector<uint64_t> stack;
  std::string site;             // the shim's own reading of the call site
  std::vector<PythonFrame> python_site;
};

// An NCCL copy the process held (kLibrary record).
struct NcclLibrary {
  int id = 0;                   // attached libraries: the id ApiEvents name; else 0
  std::string path;
  std::string version;          // NCCL's version code as text ("22809"), "0" when unknown
  std::string status;           // a trace::library_record status: attached | unused | not traced
  std::string reached;          // attached: "global scope" or "dlsym from <module>"
  std::string reason;           // unused / not traced: why

  bool attached() const { return status == trace::library_record::kAttached; }
  bool not_traced() const { return status == trace::library_record::kNotTraced; }
};

// Signal records kept per process: one per watched signal is written; more are a damaged file.
inline constexpr size_t kMaxSignalsKept = 8;

struct ProcessTrace {
  std::string path;                            // the file's name as text (valid UTF-8), for reports
  trace::FileHeader header{};
  std::map<std::string, std::string> strings;  // kProcess record: host, pid, cmdline, env.*
  std::vector<NcclLibrary> libraries;          // kLibrary records, in the order written
  std::vector<std::string> notices;
  std::optional<PythonStacks> stacks;          // the latest Stacks record
  std::vector<Module> modules;
  std::vector<CommInstance> comms;
  std::vector<ResourceInstance> resources;
  std::optional<trace::ExitRecord> exit_begin;
  std::optional<trace::ExitRecord> process_end;
  std::map<std::string, std::string> ending;   // kEnding: a Python exception (trace_strings.h)
  std::vector<trace::SignalRecord> signals;    // watched signals as they arrived, who sent them
  // The shim's list of communicators alive when it wrote process_end (LiveAtExit; format 5).
  struct LiveAtExit {
    std::vector<trace::LiveComm> comms;
    bool complete = false;  // every live one is listed
  };
  std::optional<LiveAtExit> live_at_exit;
  uint64_t lost_records = 0;
  ReadStats stats;
  ImplausibleValues implausible;               // what this file claimed that no job has

  std::string host() const { return header.host; }
  // The variables of the process the shim kept (NCCL_*, TORCH_NCCL_*, ...), those of them named
  // NCCL_* ("NCCL_DEBUG" -> "INFO"), and the NCCL version it ran.
  std::map<std::string, std::string> environment() const;
  std::map<std::string, std::string> nccl_env() const;
  std::string nccl_version() const;
  // The path of the library that made `c` ("" when unknown).
  std::string library_path(const CommInstance& c) const;
  bool has_several_libraries() const;
  int pid() const { return static_cast<int>(header.pid); }
  // Wall-clock ns for a monotonic timestamp of this process.
  int64_t to_wall(int64_t mono_ns) const {
    return wrap_add(header.start_wall_ns, wrap_sub(mono_ns, header.start_mono_ns));
  }
  int64_t last_time_ns = 0;  // latest timestamp seen: "now" for a process that died
};

struct Job {
  std::vector<ProcessTrace> processes;
  std::vector<TraceProblem> problems;
};

// NCCL's version code as people write it: "22809" -> "2.28.9" (codes before 2.9 were
// major*1000 + minor*100 + patch); "" or "0" -> "unknown version".
std::string nccl_version_text(const std::string& code);

// NCCL copies some process held that its trace cannot speak for, grouped across processes.
struct UntracedCopy {
  std::string path;
  std::string reason;
  int processes = 0;
};
std::vector<UntracedCopy> untraced_copies(const Job& job);

std::string hex_id(uint64_t id);  // 16 hex digits

// "SIGINT" for 2: the name a shell prints; "signal N" for one the C library cannot name.
std::string signal_name(int sig);
// How the process's trace ended, after "until": "SIGTERM", "the process exited", or "the trace
// ends (the process was killed)".
std::string trace_end_text(const ProcessTrace& p);
// Whether it was killed: by a signal, or without the final record a process writes as it ends.
bool ended_by_kill(const ProcessTrace& p);
// How the process ended, after "its process ": "exited with status 1 after RuntimeError: boom
// (raised at train.py:12 in step)", "was killed by SIGTERM", "ended without a
// final record (killed or crashed)", "exited" (a trace that did not record the status).
std::string process_ending_text(const ProcessTrace& p);
// The arrival of `sig` (0: the first one), if its record was written.
const trace::SignalRecord* signal_arrival(const ProcessTrace& p, int sig = 0);
// The sender's command name as the shim read it, made printable ("" if it was not readable).
std::string signal_sender_name(const trace::SignalRecord& s);
// ", sent by pid 4242 (torchrun, its parent, uid 0)", ", sent by the kernel", or "" when unknown.
std::string signal_sender_text(const trace::SignalRecord& s, int64_t own_pid);

}  // namespace ncclwatch::model
