// Reads one trace file, salvaging what a dying process left: every committed record is
// delivered, holes and torn records are skipped and counted, and what is wrong is named.
#pragma once

#include <ncclwatch/trace_format.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ncclwatch::report {

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
};

struct TraceProblem {
  std::string path;
  std::string what;
  bool fatal;  // the file gave nothing usable
};

using RecordVisitor = std::function<void(const RecordView&)>;
// Returns false to stop reading (a reader that needs only the start of a file).
using StoppableVisitor = std::function<bool(const RecordView&)>;

// Maps `path` and calls `visit` for every committed record, in file order. Returns false when
// the file cannot be used at all; problems (fatal or not) are appended to `problems`.
bool read_trace(const std::string& path, const RecordVisitor& visit, trace::FileHeader& header, ReadStats& stats,
                std::vector<TraceProblem>& problems);

// As read_trace, but stops as soon as `visit` returns false.
bool read_trace_until(const std::string& path, const StoppableVisitor& visit, trace::FileHeader& header,
                      ReadStats& stats, std::vector<TraceProblem>& problems);

// Expands directories into the trace files they hold (*.nwt), sorted; files are kept as given.
std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, std::vector<TraceProblem>& problems);

}  // namespace ncclwatch::report
