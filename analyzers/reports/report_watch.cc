// ncclwatch-report watch: the job-wide hang verdict while the job still runs.
//
// The shim keeps a file `<trace>.stalled` beside a trace while its watchdog sees an op stalled
// (gpu/gpu_watchdog.cc), and, while this watcher's `watching` file is in the folder,
// `<trace>.progress`: the collectives it issued on each communicator (gpu/progress_file.h). The
// watcher lists the job's folders a few times a second and reads the progress files once a second
// (nothing else while the job is well: no trace is read). It suspects a hang when a stall appears,
// or when a rank has issued fewer collectives on a communicator than a peer for longer than the
// lag threshold (a job-level rule, which fires before any rank's watchdog). Then it asks every
// process for its stacks (a `dump-now` file in each folder, answered within a second), reads the
// traces, prints the verdict on stderr with where each rank's Python is, and writes it to
// `verdict.json` beside the traces (hang --json's shape, plus "live"). It says it again only when
// the verdict changes, and once when the suspicion is gone.
//
// The folder may be one others can write (a shared 0777 folder), so nothing found there is taken
// on trust:
//   - the watcher's own files (watching, dump-now, verdict.json) are replaced only when they are
//     regular files of this user's, through exclusive temporary names, never through a link;
//   - a marker or progress file is opened without following a link and without blocking, and taken
//     only when it is a regular file of at most kMaxSmallFileBytes owned by a trusted user (see
//     trusted_owners()); what is not is ignored, and said once;
//   - it is believed only when its trace (`<trace>.stalled` speaks for `<trace>`) stands beside it,
//     owned by the same user, and the traces, once read, show that trace still running (no end
//     record), or the file has gone since (what the shim made went with its process): a marker or
//     progress file that outlived its process is no hang; one that went with it was one while it
//     lasted. What the traces disproved is not suspected again while the file says the same;
//   - the traces are read at most once per kMinSecondsBetweenReads, and no sooner than 20 times
//     the last read took after it: a marker made and removed every second costs a read of the
//     traces every few seconds at most.
#include "reports/analysis_json.h"
#include "reports/commands.h"
#include "reports/input.h"
#include "reports/output.h"

#include <ncclwatch/trace_format.h>
#include <ncclwatch/trace_strings.h>

#include <fmt/format.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <tuple>

namespace ncclwatch::report {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kStalledSuffix = trace::progress_file::kStalledSuffix;
constexpr std::string_view kProgressSuffix = trace::progress_file::kSuffix;
// A marker holds one line, a progress file a line per communicator: 64 KiB is far more than either.
constexpr size_t kMaxSmallFileBytes = 64 << 10;
// A file that changes more often than this is read at most this often (its last text stands).
constexpr auto kMinSecondsBetweenRereads = std::chrono::seconds(1);
constexpr auto kMinSecondsBetweenReads = std::chrono::seconds(5);
constexpr int kReadCostFactor = 20;

// The users whose files in the folders the watcher takes: its own; the user of the process it
// watches (--pid: the launcher, run as the job's user); and the owner of a folder only they can
// write (no one else could have put files there). The owner of a folder others can write is not
// trusted for it: whoever made a shared folder is not the job.
std::set<uid_t> trusted_owners(const std::vector<std::string>& folders, pid_t until_pid) {
  std::set<uid_t> out{geteuid()};
  struct stat st {};
  if (until_pid > 0 && ::stat(fmt::format("/proc/{}", until_pid).c_str(), &st) == 0) out.insert(st.st_uid);
  for (const std::string& folder : folders)
    if (::stat(folder.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && !(st.st_mode & (S_IWGRP | S_IWOTH)))
      out.insert(st.st_uid);
  return out;
}

// A line from a file others may have written, for stderr: valid UTF-8, with every control
// character (C0, DEL, C1) shown as \xNN or \uNNNN, so no escape sequence reaches a terminal.
std::string printable_line(std::string_view bytes) {
  std::string text = valid_utf8(bytes), out;
  for (size_t i = 0; i < text.size(); ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7F) {
      out += fmt::format("\\x{:02x}", byte);
    } else if (byte == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[++i]));
    } else {
      out += text[i];
    }
  }
  return out;
}

// What identifies one version of a file: a new file, or a write to it, changes one of these.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  uid_t uid = 0;
  auto operator<=>(const FileIdentity&) const = default;
};

FileIdentity identity_of(const struct stat& st) {
  return {st.st_dev, st.st_ino, st.st_size,
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec, st.st_uid};
}

std::string file_kind_refused(const struct stat& st) {
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (S_ISFIFO(st.st_mode)) return "it is a FIFO";
  if (S_ISSOCK(st.st_mode)) return "it is a socket";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "it is a device";
  if (S_ISDIR(st.st_mode)) return "it is a directory";
  if (!S_ISREG(st.st_mode)) return "it is not a regular file";
  return "";
}

// The small files of the folders (markers, progress files), read through a cache: a file is
// re-read only when its identity changed, and at most once per kMinSecondsBetweenRereads.
class SmallFiles {
 public:
  explicit SmallFiles(std::set<uid_t> trusted) : trusted_(std::move(trusted)) {}

  // The text of `path` when it is a file the watcher takes; nullopt (and said once) when not.
  std::optional<std::string> text(const fs::path& path) {
    std::string key = path.string();
    struct stat st {};
    if (::lstat(key.c_str(), &st) != 0) return std::nullopt;  // gone since the listing
    std::string why = why_refused(st);
    if (!why.empty()) return ignored(key, why);
    FileIdentity now = identity_of(st);
    auto cached = cache_.find(key);
    if (cached != cache_.end() &&
        (cached->second.identity == now || Clock::now() - cached->second.read_at < kMinSecondsBetweenRereads))
      return cached->second.text;
    std::optional<std::string> read = read_capped(key, now, why);
    if (!read) return ignored(key, why);
    cache_[key] = {now, *read, Clock::now()};
    return read;
  }

  // Whether `trace`, the trace a marker or progress file at `path` speaks for, stands beside it
  // as a regular file of the same owner.
  bool has_its_trace(const fs::path& path, const fs::path& trace) {
    struct stat mine {};
    struct stat its {};
    if (::lstat(path.c_str(), &mine) != 0) return false;
    std::string key = path.string();
    if (::lstat(trace.c_str(), &its) != 0 || !S_ISREG(its.st_mode)) {
      ignored(key, fmt::format("no trace {} beside it", trace.filename().string()));
      return false;
    }
    if (its.st_uid != mine.st_uid) {
      ignored(key, fmt::format("it is owned by uid {}, its trace by uid {}", mine.st_uid, its.st_uid));
      return false;
    }
    return true;
  }

  // Drops what is cached of files no longer listed.
  void keep_only(const std::set<std::string>& listed) {
    std::erase_if(cache_, [&](const auto& entry) { return !listed.count(entry.first); });
  }

 private:
  struct Cached {
    FileIdentity identity;
    std::string text;
    Clock::time_point read_at;
  };

  std::string why_refused(const struct stat& st) const {
    if (std::string kind = file_kind_refused(st); !kind.empty()) return kind;
    if (!trusted_.count(st.st_uid)) return fmt::format("it is owned by uid {}, not by the job's user", st.st_uid);
    if (static_cast<uint64_t>(st.st_size) > kMaxSmallFileBytes)
      return fmt::format("it holds {} bytes, more than the {} such a file ever holds", st.st_size, kMaxSmallFileBytes);
    return "";
  }

  // O_NOFOLLOW and O_NONBLOCK: the entry swapped for a link or a FIFO since the lstat() is refused,
  // never followed nor waited on; what is read is what fstat() checked, and no more than the cap.
  std::optional<std::string> read_capped(const std::string& path, const FileIdentity& listed, std::string& why) const {
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
      why = errno == ELOOP ? "it is a symbolic link" : fmt::format("cannot open it: {}", std::strerror(errno));
      return std::nullopt;
    }
    struct stat st {};
    std::string text;
    if (::fstat(fd, &st) != 0)
      why = fmt::format("cannot stat it: {}", std::strerror(errno));
    else if (st.st_ino != listed.ino || st.st_dev != listed.dev)
      why = "it was replaced while being read";
    else
      why = why_refused(st);
    if (why.empty()) {
      text.resize(kMaxSmallFileBytes + 1);
      size_t got = 0;
      while (got < text.size()) {
        ssize_t n = ::read(fd, text.data() + got, text.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
      }
      text.resize(got);
      if (got > kMaxSmallFileBytes) why = fmt::format("it grew past {} bytes", kMaxSmallFileBytes);
    }
    ::close(fd);
    if (!why.empty()) return std::nullopt;
    return text;
  }

  std::nullopt_t ignored(const std::string& path, const std::string& why) {
    if (said_.insert(path + '\n' + why).second) say("watch: ignored {}: {}", printable_line(path), printable_line(why));
    return std::nullopt;
  }

  std::set<uid_t> trusted_;
  std::map<std::string, Cached> cache_;
  std::set<std::string> said_;
};

// What makes the watcher suspect a hang: a stall marker or a lagging rank, the trace of the
// process it speaks for, and the line to say.
struct Suspicion {
  std::string line;
  fs::path trace;
  fs::path evidence;  // the marker or progress file
};

// `<trace>.stalled` and `<trace>.progress` speak for `<trace>`.
fs::path trace_beside(const fs::path& file, std::string_view suffix) {
  std::string name = file.filename().string();
  return file.parent_path() / name.substr(0, name.size() - suffix.size());
}

// The stall markers and progress files of the folders (names longer than their suffix).
struct Listing {
  std::vector<fs::path> markers, progress;
};
Listing list_folders(const std::vector<std::string>& folders) {
  Listing out;
  for (const std::string& folder : folders) {
    std::error_code ec;
    for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
      std::string name = e.path().filename().string();
      if (name.size() > kStalledSuffix.size() && name.ends_with(kStalledSuffix)) out.markers.push_back(e.path());
      if (name.size() > kProgressSuffix.size() && name.ends_with(kProgressSuffix)) out.progress.push_back(e.path());
    }
  }
  return out;
}

// The stall markers of the folders, by path: each one's first line.
std::map<std::string, Suspicion> stall_markers(const std::vector<fs::path>& markers, SmallFiles& files) {
  std::map<std::string, Suspicion> out;
  for (const fs::path& marker : markers) {
    std::optional<std::string> text = files.text(marker);
    fs::path trace = trace_beside(marker, kStalledSuffix);
    if (!text || !files.has_its_trace(marker, trace)) continue;
    out[marker.string()] = {printable_line(text->substr(0, text->find('\n'))), trace, marker};
  }
  return out;
}

// One line of a progress file: a rank's collectives issued on a communicator.
struct RankIssued {
  std::string comm;
  int rank = -1;
  uint64_t issued = 0;
  fs::path trace;  // the trace of the process that wrote it
  fs::path file;   // the progress file
};

// The progress files in the folders; a file that is not one (or half-written) is skipped.
std::vector<RankIssued> read_progress(const std::vector<fs::path>& progress_files, SmallFiles& files) {
  std::vector<RankIssued> out;
  for (const fs::path& path : progress_files) {
    std::optional<std::string> text = files.text(path);
    fs::path trace = trace_beside(path, kProgressSuffix);
    if (!text || !files.has_its_trace(path, trace)) continue;
    std::string_view rest(*text);
    auto next_line = [&rest]() {
      size_t end = rest.find('\n');
      std::string_view line = rest.substr(0, end);
      rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
      return std::string(line);
    };
    if (next_line() != trace::progress_file::kHeader) continue;
    while (!rest.empty()) {
      std::string line = next_line();
      char comm[24] = {};
      int rank = -1, nranks = 0;
      unsigned long long issued = 0;
      if (std::sscanf(line.c_str(), "comm %16s %d %d %llu", comm, &rank, &nranks, &issued) == 4 && rank >= 0)
        out.push_back({comm, rank, issued, trace, path});
    }
  }
  return out;
}

// The job-level rule: a rank that issued fewer collectives on a communicator than a peer did, and
// stayed there for longer than `lag_s` (as seen by this watcher). `behind_since` remembers when
// each (comm, rank, count) was first seen behind.
using BehindKey = std::tuple<std::string, int, uint64_t>;
std::map<BehindKey, Suspicion> lagging_ranks(const std::vector<RankIssued>& ranks, double lag_s,
                                             std::map<BehindKey, Clock::time_point>& behind_since) {
  auto now = Clock::now();
  std::map<std::string, uint64_t> most;  // comm -> the most any rank issued
  for (const RankIssued& r : ranks) most[r.comm] = std::max(most[r.comm], r.issued);
  std::map<BehindKey, Clock::time_point> still_behind;
  std::map<BehindKey, Suspicion> out;
  for (const RankIssued& r : ranks) {
    if (r.issued >= most[r.comm]) continue;
    BehindKey key{r.comm, r.rank, r.issued};
    auto seen = behind_since.find(key);
    auto since = seen == behind_since.end() ? now : seen->second;
    still_behind[key] = since;
    double behind_s = std::chrono::duration<double>(now - since).count();
    if (lag_s > 0 && behind_s >= lag_s)
      out[key] = {printable_line(
                      fmt::format("rank {} of comm {} has not issued collective {} for {:.0f} s while a peer issued {}",
                                  r.rank, r.comm, r.issued + 1, behind_s, most[r.comm])),
                  r.trace, r.file};
  }
  behind_since = std::move(still_behind);
  return out;
}

// Set by SIGTERM/SIGINT: the watcher stops at its next look and takes its `watching` mark away.
volatile sig_atomic_t g_stop_watching = 0;
void stop_watching(int) { g_stop_watching = 1; }

// The watcher's files are the job's: owner-only, or group-readable as the shim's traces are with
// NCCLWATCH_GROUP_READABLE=1 (the launcher spells it so too).
mode_t watcher_file_mode() {
  const char* group_readable = std::getenv("NCCLWATCH_GROUP_READABLE");
  return group_readable && std::string_view(group_readable) == "1" ? 0640 : 0600;
}

std::optional<std::pair<dev_t, ino_t>> inode_of(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return std::pair{st.st_dev, st.st_ino};
}

// A file the watcher puts in a folder (watching, dump-now, verdict.json): written safely, and
// unless `kept`, removed when the watcher stops if it is still the very file the watcher wrote.
class OwnFile {
 public:
  explicit OwnFile(fs::path path, bool kept = false) : path_(std::move(path)), kept_(kept) {}
  ~OwnFile() {
    if (!kept_ && written_ && inode_of(path_) == written_) ::unlink(path_.c_str());
  }
  OwnFile(const OwnFile&) = delete;
  OwnFile& operator=(const OwnFile&) = delete;
  // False when refused or failed (said once: `what` names what is then lost).
  bool write(std::string_view text, std::string_view what) {
    std::string why;
    if (!write_shared_folder_file(path_.string(), text, watcher_file_mode(), why)) {
      if (!refusal_said_) say("watch: cannot write {}: {}; {}", printable_line(path_.string()), why, what);
      refusal_said_ = true;
      return false;
    }
    written_ = inode_of(path_);
    return true;
  }

 private:
  fs::path path_;
  bool kept_;
  std::optional<std::pair<dev_t, ino_t>> written_;
  bool refusal_said_ = false;
};

// The watcher's presence (`watching`, holding its pid), for the shim to write progress files (none
// while nobody watches); and its requests for stacks (`dump-now`).
struct FolderFiles {
  explicit FolderFiles(const std::vector<std::string>& folders) {
    for (const std::string& folder : folders) {
      watching.emplace_back(fs::path(folder) / std::string(trace::progress_file::kWatchingFile));
      watching.back().write(fmt::format("{}\n", getpid()),
                            "the processes there write no progress files for the lag rule");
      dump_now.emplace_back(fs::path(folder) / std::string(trace::stacks_record::kRequestFile));
    }
  }
  // Every process tracing into the folders writes its Python stacks within a second (stack_requests.h).
  void ask_for_stacks() {
    for (OwnFile& request : dump_now)
      request.write(fmt::format("{}\n", std::time(nullptr)), "no process there is asked for its stacks");
  }
  std::deque<OwnFile> watching, dump_now;  // a deque: its files never move (each removes its own)
};

bool alive(pid_t pid) { return pid <= 0 || kill(pid, 0) == 0 || errno == EPERM; }

// The folders the inputs name (a trace file's folder for a file).
std::vector<std::string> folders_of(const std::vector<std::string>& inputs) {
  std::set<std::string> out;
  for (const std::string& input : inputs) {
    std::error_code ec;
    out.insert(fs::is_directory(input, ec) ? input : fs::path(input).parent_path().string());
  }
  return {out.begin(), out.end()};
}

// The verdict of the traces now, and its JSON; nullopt when no trace could be read.
struct LiveVerdict {
  std::string text;
  nlohmann::json json;
  std::set<std::pair<dev_t, ino_t>> running;  // the traces read that have no end record
};
std::optional<LiveVerdict> read_verdict(const std::vector<std::string>& inputs) {
  std::optional<JobAnalysis> analysis = load_job_or_explain(inputs, AnalysisOptions{});
  if (!analysis) return std::nullopt;
  HangReport report = hang_report(*analysis);
  LiveVerdict v;
  v.text = "verdict: " + report.verdict;
  for (const CommHang& c : report.comms)
    for (const RankProgress& r : c.per_rank)
      if (!r.where.empty())
        v.text += fmt::format("\n  comm {} rank {}: Python at {}", hex_id(c.comm_id), r.rank, r.where);
  v.json = to_json(report);
  v.json["live"] = true;
  for (size_t i = 0; i < analysis->files.size() && i < analysis->job.processes.size(); ++i)
    if (!analysis->job.processes[i].process_end)
      if (auto inode = inode_of(analysis->files[i])) v.running.insert(*inode);
  return v;
}

void write_verdict(std::deque<OwnFile>& verdict_files, const nlohmann::json& verdict) {
  for (OwnFile& file : verdict_files) file.write(verdict.dump(2) + "\n", "the verdict is on stderr only");
}

// The verdict as Prometheus series (node-exporter's textfile format), for an alert rule: one
// ncclwatch_hang_suspected per communicator with a rank that stopped short (1), or none (0) once
// every stall resolved.
void write_metrics(const std::string& path, const nlohmann::json* verdict) {
  if (path.empty()) return;
  std::string text =
      "# HELP ncclwatch_hang_suspected 1 while ncclwatch-report watch sees a stall: the communicator, the first "
      "rank that stopped short and the seq it never issued\n# TYPE ncclwatch_hang_suspected gauge\n";
  bool any = false;
  for (const nlohmann::json& c : verdict ? (*verdict)["comms"] : nlohmann::json::array()) {
    if (c["missing"].empty()) continue;
    const nlohmann::json& m = c["missing"][0];
    text += fmt::format("ncclwatch_hang_suspected{{comm=\"{}\",rank=\"{}\",seq=\"{}\"}} 1\n",
                        c["comm"].get<std::string>(), m["rank"].get<int>(), m["first_missing_seq"].get<uint64_t>());
    any = true;
  }
  if (!any) text += "ncclwatch_hang_suspected 0\n";
  write_output_atomically(path, text);
}

// What the watcher suspects now, each by a key that stays the same while the evidence does: the
// marker's path and line, or the lagging (comm, rank, collectives issued).
std::map<std::string, Suspicion> suspicions(const std::vector<std::string>& folders, SmallFiles& files, double lag_s,
                                            std::map<BehindKey, Clock::time_point>& behind_since,
                                            std::map<BehindKey, Suspicion>& lagging, Clock::time_point& next_progress) {
  Listing listing = list_folders(folders);
  std::set<std::string> listed;
  for (const auto* paths : {&listing.markers, &listing.progress})
    for (const fs::path& p : *paths) listed.insert(p.string());
  files.keep_only(listed);
  std::map<std::string, Suspicion> out;
  for (auto& [path, s] : stall_markers(listing.markers, files)) out[path + '\n' + s.line] = std::move(s);
  if (lag_s > 0 && Clock::now() >= next_progress) {
    lagging = lagging_ranks(read_progress(listing.progress, files), lag_s, behind_since);
    next_progress = Clock::now() + std::chrono::seconds(1);
  }
  for (const auto& [key, s] : lagging)
    out[fmt::format("lag {} {} {}", std::get<0>(key), std::get<1>(key), std::get<2>(key))] = s;
  return out;
}

}  // namespace

int run_watch(const Options& options, double interval_s, pid_t until_pid, const std::string& metrics_file,
              double lag_s) {
  // Before any file is written: a stop that comes while one is being written lets it finish (or
  // fail and remove its temporary) and be taken away, never leaving a temporary in the folder.
  struct sigaction stop {};
  stop.sa_handler = stop_watching;
  sigaction(SIGTERM, &stop, nullptr);
  sigaction(SIGINT, &stop, nullptr);
  std::vector<std::string> folders = folders_of(options.inputs);
  FolderFiles folder_files(folders);
  std::deque<OwnFile> verdict_files;
  for (const std::string& folder : folders) verdict_files.emplace_back(fs::path(folder) / "verdict.json", true);
  SmallFiles files(trusted_owners(folders, until_pid));
  auto interval = std::chrono::duration<double>(std::max(0.05, interval_s));
  std::set<std::string> seen;       // the suspicions the last verdict answered
  std::set<std::string> disproved;  // suspicions the traces showed to be of processes that ended
  std::string said;                 // the verdict last printed
  std::map<BehindKey, Clock::time_point> behind_since;
  std::map<BehindKey, Suspicion> lagging;
  auto next_progress = Clock::now();
  auto next_read = Clock::now();
  write_metrics(metrics_file, nullptr);
  for (; !g_stop_watching && alive(until_pid); std::this_thread::sleep_for(interval)) {
    std::map<std::string, Suspicion> suspected =
        suspicions(folders, files, lag_s, behind_since, lagging, next_progress);
    std::erase_if(suspected, [&](const auto& s) { return disproved.count(s.first); });
    std::set<std::string> keys;
    for (const auto& [key, s] : suspected) keys.insert(key);
    if (keys == seen) continue;
    if (suspected.empty()) {
      if (!said.empty()) say_line("ncclwatch: every stall resolved; the job goes on");
      write_metrics(metrics_file, nullptr);
      said.clear();
      seen.clear();
      continue;
    }
    if (Clock::now() < next_read) continue;  // the change is looked at once the traces may be read again
    bool new_suspicion = std::any_of(keys.begin(), keys.end(), [&](const std::string& k) { return !seen.count(k); });
    if (new_suspicion) {
      folder_files.ask_for_stacks();
      // Each process answers within a second of the request; the stalled ones wrote theirs.
      std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    }
    auto reading = Clock::now();
    std::optional<LiveVerdict> v = read_verdict(options.inputs);
    next_read =
        Clock::now() + std::max<Clock::duration>(kMinSecondsBetweenReads, kReadCostFactor * (Clock::now() - reading));
    seen = keys;
    // Only what a running process's trace stands behind is a suspicion (see the top of the file).
    std::erase_if(suspected, [&](const auto& s) {
      std::optional<std::pair<dev_t, ino_t>> inode = inode_of(s.second.trace);
      bool running = v && inode && v->running.count(*inode);
      struct stat st {};
      bool outlived = ::lstat(s.second.evidence.c_str(), &st) == 0;
      if (!running && outlived) disproved.insert(s.first);
      return !running && outlived;
    });
    if (suspected.empty() || !v || v->text == said) continue;
    size_t stalls =
        std::count_if(suspected.begin(), suspected.end(), [](const auto& s) { return !s.first.starts_with("lag "); });
    auto first_stall =
        std::find_if(suspected.begin(), suspected.end(), [](const auto& s) { return !s.first.starts_with("lag "); });
    std::string why = stalls ? fmt::format("{} process(es) stalled: {}", stalls, first_stall->second.line)
                             : suspected.begin()->second.line;
    say_line(fmt::format("ncclwatch: HANG SUSPECTED ({})\n{}", why, v->text));
    // The series first: whoever sees verdict.json finds the metrics already saying it.
    write_metrics(metrics_file, &v->json);
    write_verdict(verdict_files, v->json);
    said = v->text;
  }
  return 0;
}

}  // namespace ncclwatch::report
