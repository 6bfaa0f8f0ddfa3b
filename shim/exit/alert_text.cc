#include "exit/alert_text.h"

namespace ncclwatch {

AlertText& AlertText::add(char c) {
  if (len_ + 1 < cap_) {
    buf_[len_++] = c;
    buf_[len_] = '\0';
  } else {
    truncated_ = true;
  }
  return *this;
}

AlertText& AlertText::add(const char* text) {
  while (text && *text) add(*text++);
  return *this;
}

AlertText& AlertText::add_int(int64_t value) {
  if (value < 0) {
    add('-');
    value = -value;
  }
  char digits[24];
  int n = 0;
  uint64_t v = static_cast<uint64_t>(value);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  while (n) add(digits[--n]);
  return *this;
}

AlertText& AlertText::add_hex(uint64_t value, int min_digits) {
  char digits[16];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value & 0xf];
    value >>= 4;
  } while (value);
  while (n < min_digits && n < 16) digits[n++] = '0';
  while (n) add(digits[--n]);
  return *this;
}

AlertText& AlertText::add_seconds(int64_t ns) {
  if (ns < 0) ns = 0;
  int64_t tenths = ns / 100'000'000;
  add_int(tenths / 10).add('.').add_int(tenths % 10).add('s');
  return *this;
}

AlertText& AlertText::add_bytes(uint64_t bytes) {
  if (bytes < 10 * 1024) return add_int(static_cast<int64_t>(bytes)).add(" B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  uint64_t scaled = bytes * 10 / 1024;
  int unit = 0;
  while (scaled >= 10 * 1024 && unit < 3) {
    scaled /= 1024;
    ++unit;
  }
  add_int(static_cast<int64_t>(scaled / 10)).add('.').add_int(static_cast<int64_t>(scaled % 10)).add(' ');
  return add(units[unit]);
}

}  // namespace ncclwatch
