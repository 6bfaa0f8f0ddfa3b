// The cells of a column table (column_table.h) in each format.
#include "reports/column_table.h"

namespace ncclwatch::report::column_cell {

std::string written(const Cell& cell, int decimals, bool text) {
  struct Writer {
    int decimals;
    bool text;
    std::string operator()(std::monostate) const { return text ? "-" : ""; }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(uint64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return fmt::format("{:.{}f}", v, decimals); }
    std::string operator()(const std::string& v) const { return v; }
  };
  return std::visit(Writer{decimals, text}, cell);
}

nlohmann::json as_json(const Cell& cell) {
  struct Json {
    nlohmann::json operator()(std::monostate) const { return nullptr; }
    nlohmann::json operator()(int64_t v) const { return v; }
    nlohmann::json operator()(uint64_t v) const { return v; }
    nlohmann::json operator()(double v) const { return v; }
    nlohmann::json operator()(const std::string& v) const { return v; }
  };
  return std::visit(Json{}, cell);
}

void put(nlohmann::json& object, std::string_view key, nlohmann::json value) {
  size_t dot = key.find('.');
  if (dot == std::string_view::npos) {
    object[std::string(key)] = std::move(value);
    return;
  }
  put(object[std::string(key.substr(0, dot))], key.substr(dot + 1), std::move(value));
}

std::string padded(const std::string& text, int width) {
  std::string shown = printable_text(text);
  return width < 0 ? fmt::format("{:<{}}", shown, -width) : fmt::format("{:>{}}", shown, width);
}

}  // namespace ncclwatch::report::column_cell
