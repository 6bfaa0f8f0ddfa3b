// The keys and values inside StringsRecords (trace_format.h): the shim writes them, the analyzers
// read them back, so both spell them from here. A record's body is "key=value\0" entries; a key
// may repeat (the reader joins its values with commas).
#pragma once

#include <string>
#include <string_view>

namespace ncclwatch::trace {

// kProcess: the process, once, first.
namespace process_record {
inline constexpr std::string_view kHost = "host";
inline constexpr std::string_view kPid = "pid";
inline constexpr std::string_view kPpid = "ppid";
inline constexpr std::string_view kExe = "exe";
inline constexpr std::string_view kCmdline = "cmdline";
// Leads each environment variable kept: "env.NCCL_DEBUG=INFO".
inline constexpr std::string_view kEnvPrefix = "env.";
inline constexpr std::string_view kEnvLeftOut = "env_left_out";  // how many variables did not fit
}  // namespace process_record

// kLibrary: one NCCL copy in the process.
namespace library_record {
inline constexpr std::string_view kId = "id";            // attached ones: what ApiEvent.library names
inline constexpr std::string_view kPath = "path";
inline constexpr std::string_view kVersion = "version";  // NCCL's version code ("22809"), 0 unknown
inline constexpr std::string_view kStatus = "status";    // one of the three below
inline constexpr std::string_view kReached = "reached";  // attached: how calls reach it
inline constexpr std::string_view kProfilingAliases = "profiling_aliases";  // 1: pnccl* names found
inline constexpr std::string_view kMissing = "missing";  // once per API function it lacks
inline constexpr std::string_view kReason = "reason";    // unused, not traced: why

// The values of kStatus. A format 2 file wrote attached libraries only, without a status.
inline constexpr std::string_view kAttached = "attached";     // calls reach it through the shim
inline constexpr std::string_view kUnused = "unused";         // loaded, no call reached it
inline constexpr std::string_view kNotTraced = "not traced";  // its calls bypass the shim
}  // namespace library_record

// kNotice: a line the shim printed on stderr.
namespace notice_record {
inline constexpr std::string_view kText = "text";
}  // namespace notice_record

// kGraph: a CUDA graph that holds NCCL ops (or a capture of some that came to nothing), and each
// executable graph made from it. One record per event; `index` ties them together and is what the
// ops' `graph` field names.
namespace graph_record {
inline constexpr std::string_view kIndex = "index";      // from 1, per process
inline constexpr std::string_view kEvent = "event";      // one of the events below
inline constexpr std::string_view kCapture = "capture";  // CUDA's capture id (unique per process)
inline constexpr std::string_view kGraph = "graph";      // the CUgraph handle, hex
inline constexpr std::string_view kExec = "exec";        // the CUgraphExec handle, hex
inline constexpr std::string_view kOps = "ops";          // NCCL ops the graph runs at each replay
inline constexpr std::string_view kComms = "comms";      // communicators (comm ids, hex) they use, comma-separated
inline constexpr std::string_view kDetail = "detail";    // what could not be followed, in words

// The values of kEvent.
inline constexpr std::string_view kCaptured = "captured";          // a capture ended: the graph and its ops
inline constexpr std::string_view kInstantiated = "instantiated";  // an exec of the graph: its launches are replays
inline constexpr std::string_view kUpdated = "updated";            // cuGraphExecUpdate gave the exec another graph
inline constexpr std::string_view kCaptureFailed = "capture_failed";  // the capture ended in an error: no graph
inline constexpr std::string_view kNotFollowed = "not_followed";   // replays of this exec are no longer recorded
}  // namespace graph_record

// kStacks: where every Python thread of the process was, when the watchdog saw a stall or a
// watcher asked (a file `dump-now` in the trace folder, newer than the last answer).
namespace stacks_record {
inline constexpr std::string_view kReason = "reason";  // kStall or kRequested
inline constexpr std::string_view kThread = "thread";  // once per thread: its frames, innermost first,
                                                       // "path\tline\tfunction\n" each
// The native stack of the thread that issued the stalled op (on a request: the first thread that
// launched NCCL work), scanned without stopping it (shim/site/native_stack.h): "tid addr addr ...",
// hex addresses innermost first (the program counter, then return addresses); or, when it could
// not be read, kNativeUnread: "tid why".
inline constexpr std::string_view kNative = "native";
inline constexpr std::string_view kNativeUnread = "native_unread";
inline constexpr std::string_view kStall = "stall";
inline constexpr std::string_view kRequested = "requested";
inline constexpr std::string_view kRequestFile = "dump-now";  // in the trace folder
}  // namespace stacks_record

// kEnding: how the process is ending, where more is known than the exit record holds: a Python
// exception nobody caught (read while the interpreter runs its exit callbacks). Each key at most
// once; any may be missing.
namespace ending_record {
inline constexpr std::string_view kExceptionType = "exception_type";        // "RuntimeError"
inline constexpr std::string_view kExceptionMessage = "exception_message";  // str() of it, cut to fit
inline constexpr std::string_view kExceptionFile = "exception_file";        // where it was raised
inline constexpr std::string_view kExceptionLine = "exception_line";
inline constexpr std::string_view kExceptionFunction = "exception_function";
}  // namespace ending_record

// Beside a trace, for a watcher of its folder (shim/gpu/progress_file.h): "<trace>.progress",
// kHeader then "comm <id hex> <rank> <nranks> <collectives issued>" per line, while the folder
// holds kWatchingFile; "<trace>.stalled" while the watchdog sees a stall.
namespace progress_file {
inline constexpr std::string_view kSuffix = ".progress";
inline constexpr std::string_view kHeader = "ncclwatch-progress 1";
inline constexpr std::string_view kWatchingFile = "watching";
inline constexpr std::string_view kStalledSuffix = ".stalled";
}  // namespace progress_file

// Appends one "key=value\0" entry.
inline void append_string(std::string& blob, std::string_view key, std::string_view value) {
  blob.append(key);
  blob += '=';
  blob.append(value);
  blob += '\0';
}

// Calls on_entry(key, value) for each entry of a record's body, in order; an entry without '='
// is skipped, and the last one may lack its '\0'.
template <class OnEntry> void for_each_string(std::string_view blob, OnEntry&& on_entry) {
  while (!blob.empty()) {
    size_t nul = blob.find('\0');
    std::string_view entry = blob.substr(0, nul);
    if (size_t eq = entry.find('='); eq != std::string_view::npos) on_entry(entry.substr(0, eq), entry.substr(eq + 1));
    if (nul == std::string_view::npos) break;
    blob.remove_prefix(nul + 1);
  }
}

}  // namespace ncclwatch::trace
