// One declaration per output table (reports/column_table.h): each format takes what the table says,
// and only that.
#include "reports/column_table.h"

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

using namespace ncclwatch::report;

namespace {

struct Sample {
  std::string name;
  uint64_t bytes = 0;
  std::optional<double> us;
};

const Column<Sample> kColumns[] = {
    {.json = "name", .csv = "name", .text = "name", .width = -6, .value = [](const Sample& s) -> Cell { return s.name; },
     .json_if_empty = false},
    {.json = "bytes", .csv = "bytes", .text = "bytes", .width = 6, .value = [](const Sample& s) -> Cell { return s.bytes; }},
    {.json = "timing.us", .csv = "us", .text = "us", .width = 7, .text_decimals = 1,
     .value = [](const Sample& s) { return maybe(s.us); }},
    {.json = "hidden_from_text", .value = [](const Sample&) -> Cell { return int64_t{-3}; }},
    {.text = "shown", .value = [](const Sample&) -> Cell { return std::string("raw"); },
     .shown = [](const Sample& s) -> Cell { return "<" + s.name + ">"; }},
};
const std::vector<Sample> kRows = {{"a", 4096, 12.345}, {"", 8, std::nullopt}};

}  // namespace

TEST_CASE("a column table gives JSON its keys nested and leaves out empty names it is told to") {
  auto first = json_of<Sample>(kColumns, kRows[0]);
  CHECK(first.dump() == R"({"bytes":4096,"hidden_from_text":-3,"name":"a","timing":{"us":12.345}})");
  auto second = json_of<Sample>(kColumns, kRows[1]);
  CHECK(second.dump() == R"({"bytes":8,"hidden_from_text":-3,"timing":{"us":null}})");
}

TEST_CASE("a column table gives CSV only its CSV columns with three decimals and absent values empty") {
  auto fields = csv_fields<Sample>(kColumns, kRows);
  REQUIRE(fields.size() == 3);
  CHECK(fields[0] == std::vector<std::string>{"name", "bytes", "us"});
  CHECK(fields[1] == std::vector<std::string>{"a", "4096", "12.345"});
  CHECK(fields[2] == std::vector<std::string>{"", "8", ""});
}

TEST_CASE("a column table pads text to its widths and shows what the column says it shows") {
  CHECK(text_table<Sample>(kColumns, kRows) ==
        "name    bytes      us shown\n"
        "a        4096    12.3 <a>\n"
        "            8       - <>\n");
}

TEST_CASE("a column table makes text from a trace printable before padding it") {
  std::vector<Sample> hostile = {{"\x1b[31m", 1, 1.0}};
  std::string text = text_table<Sample>(kColumns, hostile);
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find("\\x1b[31m") != std::string::npos);
}
