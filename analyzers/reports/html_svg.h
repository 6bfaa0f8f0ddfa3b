// The html report's drawing: escaping and inline SVG line charts (the page loads nothing).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ncclwatch::report {

// Text for HTML content and attribute values alike. Trace strings are UTF-8 already (the reader
// sees to it); valid_utf8 again costs little and keeps a bad byte from reaching the page.
std::string esc(std::string_view raw);

// The label people know a communicator by: its name (escaped) and id, from comm_names().
std::string comm_html(uint64_t id, const std::map<uint64_t, std::string>& names);

struct Point {
  double x, y;
  std::string tip;  // hover text (raw; escaped when written); a step line marks only points with one
};

struct Series {
  std::string label;
  std::string colour;
  std::string css_class;  // "busbw", "latency", "live" or "memory": what the polyline is, for readers of the page's source
  std::vector<Point> points;
  bool step = false;      // a step line: horizontal, then vertical
};

struct Axis {
  double lo = 0, hi = 1;
  std::vector<std::pair<double, std::string>> ticks;
  std::string title;
};

// From 0 to a round value above `max_value`, about five ticks (`precision_hint` decimals, or as
// the step needs).
Axis linear_axis(double max_value, const std::string& title, int precision_hint = -1);
// x in log2(bytes); ticks at powers of two, thinned to about a dozen labels.
Axis log2_bytes_axis(double lo, double hi);
// Values in log10 (of microseconds): ticks at 1, 10, 100 us, 1 ms, ...
Axis log10_us_axis(double lo, double hi, const std::string& title);
// The heatmaps' scale, low to high, and the colour of a cell with nothing recorded.
inline constexpr const char* kHeatColours[] = {"#ffffcc", "#ffeda0", "#fed976", "#feb24c",
                                               "#fd8d3c", "#fc4e2a", "#e31a1c", "#b10026"};
inline constexpr const char* kNoDataColour = "#d4d4dc";

// One chart of `series`, with a legend; `aria` names it for screen readers.
std::string line_chart(const std::vector<Series>& series, const Axis& x, const Axis& y, const std::string& aria);

}  // namespace ncclwatch::report
