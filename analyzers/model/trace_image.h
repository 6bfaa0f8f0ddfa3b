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
//
// The file is opened once and read in order, a prefix first if the caller wants one (the clock
// sampling reads the start of every file before the main pass reads the rest): what is not read
// yet looks like a hole, and reading on never reads a byte twice.
class TraceImage {
 public:
  TraceImage() = default;
  TraceImage(const TraceImage&) = delete;
  TraceImage& operator=(const TraceImage&) = delete;
  ~TraceImage();

  // Opens `path` and finds its data; reads nothing yet. False, with `error` saying why, when it
  // cannot be read at all.
  bool open(const std::string& path, std::string& error);
  // Reads on up to `limit` bytes from the start of the file (all of it by default). `lost` says
  // what could not be read of a file that could be opened (it shrank while being read); empty when
  // nothing was lost. Closes the file once all of it is in memory. False, with `error`, when no
  // memory could hold it (the image is released).
  bool read_upto(std::string& lost, std::string& error, uint64_t limit = UINT64_MAX);
  // open and read_upto in one.
  bool load(const std::string& path, std::string& error, std::string& lost);
  // Frees the memory and closes the file.
  void release();

  bool opened() const { return open_; }
  bool complete() const { return read_end_ >= size_; }
  // Whether the bytes up to `end` are read (or are holes): a record ending after it is only partly
  // in memory.
  bool read_through(uint64_t end) const { return end <= read_end_; }
  uint64_t bytes_read() const { return bytes_read_; }  // of data, so far

  const std::byte* data() const { return base_; }
  uint64_t size() const { return size_; }  // up to the last byte of data

  // Calls visit(first, end) for the runs [first, end) of the `count` items of `item_bytes` bytes
  // from `offset` that hold data read so far; every other item lies wholly in a hole or in what is
  // not read yet (all zeros). Runs come in order and never overlap. Returns false as soon as
  // `visit` does.
  template <class Visit>
  bool for_each_item_with_data(uint64_t offset, uint64_t item_bytes, uint64_t count, Visit&& visit) const {
    uint64_t end = offset + item_bytes * count;
    if (read_end_ <= offset) return true;
    uint64_t next = 0;  // the first item not visited yet
    auto extent = std::upper_bound(extents_.begin(), extents_.end(), offset,
                                   [](uint64_t at, const Extent& e) { return at < e.end; });
    for (; extent != extents_.end() && extent->begin < std::min(end, read_end_) && next < count; ++extent) {
      uint64_t first = std::max(next, (std::max(extent->begin, offset) - offset) / item_bytes);
      uint64_t stop = std::min(extent->end, end);
      // An item partly in a hole holds data; one partly read is not there yet.
      uint64_t last = stop > read_end_ ? (read_end_ - offset) / item_bytes : (stop - offset + item_bytes - 1) / item_bytes;
      last = std::min(count, last);
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
  void find_extents(uint64_t file_size);
  void close_file();
  bool make_room(uint64_t want, std::string& error);  // memory for the bytes up to `want`

  std::vector<Extent> extents_;  // the data, in file order
  std::byte* base_ = nullptr;
  size_t mapped_ = 0;
  uint64_t size_ = 0;
  uint64_t file_size_ = 0;   // as opened
  uint64_t read_end_ = 0;    // everything before it is in memory (or a hole)
  uint64_t bytes_read_ = 0;
  int fd_ = -1;
  bool open_ = false;
  bool dense_ = false;  // no holes: every byte is read (a reused mapping holds the last file's)
};

}  // namespace ncclwatch::model
