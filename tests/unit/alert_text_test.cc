// The exit alert's allocation-free formatter.
#include "exit/alert_text.h"

#include <catch2/catch.hpp>

#include <string>

using ncclwatch::AlertText;

TEST_CASE("numbers, sizes and durations format as a person reads them") {
  char buffer[256];
  AlertText t(buffer, sizeof(buffer));
  t.add_int(-42).add(' ').add_hex(0x1dce5120, 16).add(' ').add_seconds(12'345'000'000).add(' ');
  t.add_bytes(4096).add(' ').add_bytes(3u << 20).add(' ').add_int(0);
  CHECK(std::string(t.data()) == "-42 000000001dce5120 12.3s 4096 B 3.0 MiB 0");
}

TEST_CASE("a full buffer truncates instead of overflowing") {
  char buffer[8];
  AlertText t(buffer, sizeof(buffer));
  t.add("0123456789");
  CHECK(t.truncated());
  CHECK(t.size() == 7);
  CHECK(std::string(t.data()) == "0123456");
}
