// One declaration per output table: each column once, with its names in JSON, CSV and text and how
// its value is written in each (after uftrace's field table), so that the three formats of a report
// come from one list and cannot drift apart.
#pragma once

#include "reports/output.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ncclwatch::report {

// One value: absent (JSON null, an empty CSV field, "-" in text), a count, a measurement or a text.
using Cell = std::variant<std::monostate, int64_t, uint64_t, double, std::string>;

inline Cell maybe(const std::optional<double>& v) { return v ? Cell(*v) : Cell(); }

template <class Row> struct Column {
  std::string_view json = {};  // its key in JSON; a dot nests it ("first_calls.max_us"); "": not in JSON
  std::string_view csv = {};   // its CSV header; "": not in CSV
  std::string_view text = {};  // its text header; "": not in text
  int width = 0;          // text: padded to this width, right-aligned; negative: left-aligned
  int text_decimals = 1;  // a measurement's decimals in text (CSV always writes kCsvDecimals)
  Cell (*value)(const Row&) = nullptr;
  Cell (*shown)(const Row&) = nullptr;  // what text shows instead, where it differs (a name for an id)
  bool json_if_empty = true;            // false: an empty text or no value is left out of the JSON object
};

inline constexpr int kCsvDecimals = 3;

namespace column_cell {
// A cell as CSV writes it (`decimals` < 0) or as text does (absent: "-").
std::string written(const Cell& cell, int decimals, bool text);
nlohmann::json as_json(const Cell& cell);
// Puts `value` under `key` in `object`, a dotted key in nested objects.
void put(nlohmann::json& object, std::string_view key, nlohmann::json value);
// A text cell: made printable (it may come from a trace) and padded.
std::string padded(const std::string& text, int width);
}  // namespace column_cell

template <class Row> nlohmann::json json_of(std::span<const Column<Row>> columns, const Row& row) {
  nlohmann::json object = nlohmann::json::object();
  for (const Column<Row>& c : columns) {
    if (c.json.empty()) continue;
    Cell cell = c.value(row);
    bool empty = std::holds_alternative<std::monostate>(cell) ||
                 (std::holds_alternative<std::string>(cell) && std::get<std::string>(cell).empty());
    if (!c.json_if_empty && empty) continue;
    column_cell::put(object, c.json, column_cell::as_json(cell));
  }
  return object;
}

// The CSV fields: the header, then one list per row.
template <class Row>
std::vector<std::vector<std::string>> csv_fields(std::span<const Column<Row>> columns, std::span<const Row> rows) {
  std::vector<std::vector<std::string>> out(1);
  for (const Column<Row>& c : columns)
    if (!c.csv.empty()) out[0].emplace_back(c.csv);
  for (const Row& row : rows) {
    std::vector<std::string>& fields = out.emplace_back();
    for (const Column<Row>& c : columns)
      if (!c.csv.empty()) fields.push_back(column_cell::written(c.value(row), kCsvDecimals, false));
  }
  return out;
}

template <class Row> void write_csv(std::span<const Column<Row>> columns, std::span<const Row> rows) {
  for (const std::vector<std::string>& fields : csv_fields(columns, rows)) write_csv_row(fields);
}

// The text lines: the header, then one per row, the columns one space apart, each made printable.
template <class Row> std::string text_table(std::span<const Column<Row>> columns, std::span<const Row> rows) {
  std::string out;
  auto line = [&](auto&& text_of) {
    bool first = true;
    for (const Column<Row>& c : columns) {
      if (c.text.empty()) continue;
      if (!first) out += ' ';
      first = false;
      out += column_cell::padded(text_of(c), c.width);
    }
    out += '\n';
  };
  line([](const Column<Row>& c) { return std::string(c.text); });
  for (const Row& row : rows)
    line([&](const Column<Row>& c) {
      return column_cell::written((c.shown ? c.shown : c.value)(row), c.text_decimals, true);
    });
  return out;
}

}  // namespace ncclwatch::report
