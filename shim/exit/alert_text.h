// A fixed-size text buffer that formats without allocating, so the exit alert can be built
// inside a signal handler.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ncclwatch {

class AlertText {
 public:
  AlertText(char* buffer, size_t capacity) : buf_(buffer), cap_(capacity) {}
  AlertText& add(const char* text);
  AlertText& add(char c);
  AlertText& add_int(int64_t value);
  AlertText& add_hex(uint64_t value, int min_digits = 1);
  AlertText& add_seconds(int64_t ns);   // "12.3s"
  AlertText& add_bytes(uint64_t bytes); // "4096 B", "1.5 MiB"
  const char* data() const { return buf_; }
  size_t size() const { return len_; }
  bool truncated() const { return truncated_; }

 private:
  char* buf_;
  size_t cap_;
  size_t len_ = 0;
  bool truncated_ = false;
};

}  // namespace ncclwatch
