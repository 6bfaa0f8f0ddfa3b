// Writes Parquet files that reach the writer's edge cases, for test_export.py to read back with an
// independent reader (DuckDB) and compare with the values it computes itself:
//   parquet_cases DIR
//     rows.parquet    300,000 rows (three row groups): every kind, required and nullable; a string
//                     column of 1,000 distinct values (dictionary indices wider than a byte); text
//                     beyond ASCII; extremes of each integer kind
//     empty.parquet   the same schema, no row
//     nulls.parquet   5 rows, every nullable column null
#include "parquet/parquet.h"

#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

using namespace ncclwatch::parquet;

namespace {

const std::vector<ColumnSpec> kSchema = {
    {"i", Kind::kInt64},           {"neg32", Kind::kInt32},          {"d", Kind::kDouble},
    {"b", Kind::kBool},            {"s", Kind::kString},             {"ns", Kind::kString, true},
    {"ni", Kind::kInt64, true},    {"n32", Kind::kInt32, true},      {"nd", Kind::kDouble, true},
    {"nb", Kind::kBool, true},     {"text", Kind::kString},          {"c11", Kind::kInt64},
    {"c12", Kind::kInt64},         {"c13", Kind::kInt64},            {"c14", Kind::kInt64},
    {"c15", Kind::kInt64},         {"c16", Kind::kInt64},
};

bool finish(TableWriter& w, const std::string& path) {
  std::string error;
  if (w.close(error)) return true;
  std::fprintf(stderr, "%s: %s\n", path.c_str(), error.c_str());
  return false;
}

void row(TableWriter& w, int64_t r) {
  w[0].add(r);
  w[1].add(-r);
  w[2].add(static_cast<double>(r) / 3);
  w[3].add(r % 3 == 0);
  w[4].add("s" + std::to_string(r % 1000));
  w[5].add_optional(r % 7 != 0, std::string_view(r % 5 == 0 ? "é x" : "x"));
  w[6].add_optional(r % 2 == 0, r == 0 ? std::numeric_limits<int64_t>::min() : r * 1'000'000'007);
  w[7].add_optional(r % 2 == 1, r == 1 ? int64_t{std::numeric_limits<int32_t>::max()} : r);
  w[8].add_optional(r % 4 == 0, 0.5 * static_cast<double>(r));
  w[9].add_optional(r % 3 != 2, r % 2 == 0);
  w[10].add(std::string_view(r % 100 == 0 ? "日本語 \"quoted\", comma" : ""));
  for (size_t c = 11; c < kSchema.size(); ++c) w[c].add(r * static_cast<int64_t>(c));
  w.end_row();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: parquet_cases DIR\n");
    return 2;
  }
  std::string dir = argv[1];
  const std::vector<std::pair<std::string, std::string>> metadata = {{"case", "edge"}};
  TableWriter rows(dir + "/rows.parquet", kSchema, "ncclwatch tests", metadata);
  for (int64_t r = 0; r < 300'000; ++r) row(rows, r);
  TableWriter empty(dir + "/empty.parquet", kSchema, "ncclwatch tests", metadata);
  TableWriter nulls(dir + "/nulls.parquet", kSchema, "ncclwatch tests", metadata);
  for (int r = 0; r < 5; ++r) {
    for (size_t c = 0; c < kSchema.size(); ++c) nulls[c].add_null();  // required ones get their zero
    nulls.end_row();
  }
  bool ok = finish(rows, dir + "/rows.parquet") && finish(empty, dir + "/empty.parquet") &&
            finish(nulls, dir + "/nulls.parquet");
  return ok ? 0 : 1;
}
