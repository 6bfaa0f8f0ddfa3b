// Reads one trace file, salvaging what a dying process left: every committed record is
// delivered, holes and torn records are skipped and counted, and what is wrong is named.
#pragma once

#include "model/trace_text.h"

#include <ncclwatch/trace_format.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ncclwatch::model {

// Timestamps come from files that may be damaged: arithmetic on them wraps instead of overflowing
// (a garbage time gives a garbage answer, never undefined behaviour).
constexpr int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
constexpr int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
constexpr uint64_t magnitude(int64_t v) { return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); }

struct RecordView {
  trace::RecordType type;
  const std::byte* data;  // the whole record, header included
  uint32_t size;
  uint64_t offset;        // within the file

  // The record as `T` when it is at least that large, else nullptr.
  template <class T> const T* as() const { return size >= sizeof(T) ? reinterpret_cast<const T*>(data) : nullptr; }
};

struct ReadStats {
  uint64_t records = 0;
  uint64_t skipped_bytes = 0;  // holes and corrupt spans stepped over
  uint64_t torn_records = 0;   // reserved but never committed (the writer died mid-record)
  // The ring of recent ops and GPU timings (format 4): its positions (0: the file has none), the
  // records written to it over the run, and those still in it (as far as delivered: all, unless
  // the visitor stopped the reading), in the order written.
  uint64_t ring_slots = 0;
  uint64_t ring_written = 0;
  uint64_t ring_kept = 0;
  uint64_t overwritten() const { return ring_written > ring_kept ? ring_written - ring_kept : 0; }
};

// What the reader hands on for each entry of a file's op totals table (trace::OpTotalsEntry),
// as a record of type kOpTotals, after every other record: the communicator resolved, the
// counters as the process left them. Entry 0 (keys that found no room) has `overflow` set.
struct OpTotalsRow {
  trace::RecordHeader h;
  uint64_t comm_id;
  uint64_t comm;
  int32_t rank;
  int32_t nranks;
  uint64_t count;
  uint16_t api;
  uint8_t datatype;
  uint8_t overflow;
  uint32_t reserved;
  uint64_t calls;
  uint64_t host_ns;
  uint64_t gpu_timed;
  uint64_t gpu_ns;
  int64_t first_ns;
  int64_t last_ns;
  uint32_t gpu_histogram[trace::kTotalsBuckets];
};

struct TraceProblem {
  std::string path;
  std::string what;
  bool fatal;  // the file gave nothing usable
};

using RecordVisitor = std::function<void(const RecordView&)>;
// Returns false to stop reading (a reader that needs only the start of a file).
using StoppableVisitor = std::function<bool(const RecordView&)>;

// "call_begin", "op", ... (the names `dump` uses; from the list in trace_format.h).
using trace::record_type_name;

// A problem about `path`, its name shown as valid UTF-8.
TraceProblem trace_problem(const std::string& path, std::string what, bool fatal);

// Records say how many ranks a communicator has; the analyses size nothing by that claim, but a
// size no job has is damage or a hostile file all the same. NCCL's largest jobs have ~100k ranks.
inline constexpr int32_t kMaxPlausibleRanks = 1 << 18;

// The values one file claims that no job has. The analyses take each as unknown (or leave the
// record out) and name the first, with the file, as a problem.
class ImplausibleValues {
 public:
  // The communicator size when plausible, else -1 (unknown); values <= 0 already mean unknown.
  int32_t nranks(int32_t claimed, const RecordView& r);
  // The rank when plausible (-1 unknown passes through), else -1.
  int32_t rank(int32_t claimed, const RecordView& r);
  // Anything else: `what` says the value and what was done about it.
  void note(const std::string& what, const RecordView& r);
  // One problem naming the first value and counting the others; nothing when there were none.
  void report(const std::string& path, std::vector<TraceProblem>& problems) const;

 private:
  std::string first_;
  uint64_t count_ = 0;
};

// Reads `path` and calls `visit` for every committed record, in file order; the ring's ops and GPU
// timings (format 4) as full OpRecords and GpuTimingRecords, in the order written, each placed
// among the other records by its time; then one OpTotalsRow per totals entry. Returns false when
// the file cannot be used at all, a file that holds no record included (its process died before
// recording anything); problems (fatal or not) are appended to `problems`. The header's host is
// handed on as valid UTF-8 (cut at a character boundary to fit its field).
// Hostile files in a shared folder cost a named problem, never a hang or a crash: what is no
// regular file (a FIFO) is opened without waiting and refused; the file is read, not mapped, as it is
// when opened (truncating it meanwhile costs nothing); memory and time follow the bytes it really
// holds (a sparse file's holes take neither), whatever sizes and indices its records claim.
bool read_trace(const std::string& path, const RecordVisitor& visit, trace::FileHeader& header, ReadStats& stats,
                std::vector<TraceProblem>& problems);

// As read_trace, but stops as soon as `visit` returns false.
bool read_trace_until(const std::string& path, const StoppableVisitor& visit, trace::FileHeader& header,
                      ReadStats& stats, std::vector<TraceProblem>& problems);

// As read_trace_until, from the bytes of `path` read so far into `image` (trace_image.h): all of
// the file, or a prefix, of which only the records wholly read are delivered. Naming what could
// not be read of the file is the caller's (it read it).
class TraceImage;
bool read_trace_image(const TraceImage& image, const std::string& path, const StoppableVisitor& visit,
                      trace::FileHeader& header, ReadStats& stats, std::vector<TraceProblem>& problems);

}  // namespace ncclwatch::model
