// A trace file's bytes in memory, for the reader (trace_reader.cc), which scans them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ncclwatch::model {

// A trace file's bytes, read into memory rather than mapped: a file truncated under a mapping
// raises SIGBUS at the next access, and anyone may truncate a file in a shared trace folder. Only
// the file's data extents are read (SEEK_DATA/SEEK_HOLE): holes read as zeros from untouched pages
// of an anonymous mapping, which take no memory, and the reader's scans step over them, so neither
// memory nor time grows with the size a sparse file claims. A hole is not the end of the records:
// once a copy (cp, rsync -S, tar -S) makes a trace sparse, the slots a ring chunk has not used yet
// are holes, and history records follow the chunk.
class TraceImage {
 public:
  TraceImage() = default;
  TraceImage(const TraceImage&) = delete;
  TraceImage& operator=(const TraceImage&) = delete;
  ~TraceImage();

  // Reads `path`; false, with `error` saying why, when it cannot be read at all. `lost` says what
  // was not read of a file that could be (it shrank while being read); empty when nothing was lost.
  bool load(const std::string& path, std::string& error, std::string& lost);

  const std::byte* data() const { return base_; }
  uint64_t size() const { return size_; }  // up to the last byte of data

  // Calls visit(first, end) for the runs [first, end) of the `count` items of `item_bytes` bytes
  // from `offset` that hold data; every other item lies wholly in a hole (all zeros). Runs come in
  // order and never overlap. Returns false as soon as `visit` does.
  template <class Visit>
  bool for_each_item_with_data(uint64_t offset, uint64_t item_bytes, uint64_t count, Visit&& visit) const {
    uint64_t end = offset + item_bytes * count;
    uint64_t next = 0;  // the first item not visited yet
    auto extent = std::upper_bound(extents_.begin(), extents_.end(), offset,
                                   [](uint64_t at, const Extent& e) { return at < e.end; });
    for (; extent != extents_.end() && extent->begin < end && next < count; ++extent) {
      uint64_t first = std::max(next, (std::max(extent->begin, offset) - offset) / item_bytes);
      uint64_t last = std::min(count, (std::min(extent->end, end) - offset + item_bytes - 1) / item_bytes);
      if (first >= last) continue;
      if (!visit(first, last)) return false;
      next = last;
    }
    return true;
  }

 private:
  struct Extent {
    uint64_t begin, end;
  };
  void find_extents(int fd, uint64_t file_size);

  std::vector<Extent> extents_;  // the data, in file order
  std::byte* base_ = nullptr;
  size_t mapped_ = 0;
  uint64_t size_ = 0;
};

}  // namespace ncclwatch::model
