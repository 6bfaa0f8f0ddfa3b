// The timeline's output file (report_timeline.cc): plain, or one gzip stream that reader threads
// deflate in pieces of their own.
#pragma once

#include <zlib.h>

#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace ncclwatch::report {

// The output file: plain, or gzip built from pieces that reader threads deflate on their own
// (each piece ends byte-aligned and not final; the CRC is combined in the order written).
class TimelineOutput {
 public:
  TimelineOutput(std::FILE* f, bool gzip, unsigned threads) : f_(f), gzip_(gzip), streams_(threads), scratch_(threads) {
    if (!gzip_) return;
    static const unsigned char header[10] = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    put(header, sizeof header);
    for (z_stream& z : streams_) ok_ = deflateInit2(&z, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) == Z_OK && ok_;
  }
  ~TimelineOutput() {
    if (gzip_)
      for (z_stream& z : streams_) deflateEnd(&z);
  }

  void write(const std::string& text, unsigned thread) {
    if (text.empty()) return;
    if (!gzip_) {
      std::lock_guard lock(mu_);
      put(text.data(), text.size());
      return;
    }
    z_stream& z = streams_[thread];
    std::string& out = scratch_[thread];
    out.resize(deflateBound(&z, text.size()) + 64);
    deflateReset(&z);
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    z.avail_in = static_cast<uInt>(text.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    bool deflated = deflate(&z, Z_SYNC_FLUSH) == Z_OK && z.avail_in == 0;
    size_t produced = out.size() - z.avail_out;
    uLong crc = crc32(0, reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size()));
    std::lock_guard lock(mu_);
    ok_ = ok_ && deflated;
    put(out.data(), produced);
    crc_ = crc32_combine(crc_, crc, static_cast<z_off_t>(text.size()));
    plain_bytes_ += text.size();
  }

  // Ends the stream (gzip: a final empty block, then CRC-32 and size); false if anything failed.
  bool finish() {
    if (gzip_) {
      const unsigned char last_block[2] = {0x03, 0x00};  // fixed Huffman, final, end of block
      put(last_block, 2);
      unsigned char trailer[8];
      for (int i = 0; i < 4; ++i) trailer[i] = static_cast<unsigned char>(crc_ >> (8 * i));
      for (int i = 0; i < 4; ++i) trailer[4 + i] = static_cast<unsigned char>(plain_bytes_ >> (8 * i));
      put(trailer, sizeof trailer);
    }
    return ok_ && std::fflush(f_) == 0 && !std::ferror(f_);
  }
  size_t written() const { return written_; }  // bytes handed to the file (a pipe has no position to ask)

 private:
  std::FILE* f_;
  bool gzip_;
  std::vector<z_stream> streams_;
  std::vector<std::string> scratch_;  // per thread: its compressed piece
  std::mutex mu_;
  bool ok_ = true;
  uLong crc_ = 0;
  uint64_t plain_bytes_ = 0;
  size_t written_ = 0;

  // Under mu_ (or before the readers start). A short write (disk full, closed pipe) fails the
  // whole output: the caller removes the file rather than leave a truncated one.
  void put(const void* data, size_t size) {
    size_t n = std::fwrite(data, 1, size, f_);
    written_ += n;
    ok_ = ok_ && n == size;
  }
};

}  // namespace ncclwatch::report
