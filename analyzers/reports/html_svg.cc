#include "reports/html_svg.h"

#include "reports/output.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace ncclwatch::report {

std::string esc(std::string_view raw) {
  std::string text = valid_utf8(raw);
  std::string out;
  out.reserve(text.size() + 16);
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string comm_html(uint64_t id, const std::map<uint64_t, std::string>& names) {
  auto it = names.find(id);
  if (it == names.end() || it->second.empty()) return fmt::format("<code>{}</code>", hex_id(id));
  return fmt::format("<b>{}</b> <code>{}</code>", esc(it->second), hex_id(id));
}

namespace {

// 1, 2 or 5 times a power of ten: a step that gives about `want` ticks over [0, hi].
double nice_step(double hi, int want) {
  if (hi <= 0) return 1;
  double raw = hi / want;
  double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

}  // namespace

Axis linear_axis(double max_value, const std::string& title, int precision_hint) {
  Axis a;
  a.title = title;
  double step = nice_step(max_value > 0 ? max_value * 1.05 : 1, 5);
  a.hi = std::max(step, std::ceil((max_value > 0 ? max_value * 1.05 : 1) / step) * step);
  int precision = precision_hint >= 0 ? precision_hint : step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step)));
  for (double t = 0; t <= a.hi + step / 2; t += step) a.ticks.emplace_back(t, fmt::format("{:.{}f}", t, precision));
  return a;
}

Axis log2_bytes_axis(double lo, double hi) {
  Axis a;
  a.title = "message size (bytes, log2 scale)";
  a.lo = std::floor(lo);
  a.hi = std::ceil(hi);
  if (a.hi - a.lo < 2) a.lo -= 1, a.hi += 1;
  int every = std::max(1, static_cast<int>(std::ceil((a.hi - a.lo) / 12)));
  for (int e = static_cast<int>(a.lo); e <= static_cast<int>(a.hi); ++e)
    if ((e - static_cast<int>(a.lo)) % every == 0 && e >= 0 && e < 64) a.ticks.emplace_back(e, bytes_text(uint64_t{1} << e));
  return a;
}

Axis log10_us_axis(double lo, double hi, const std::string& title) {
  Axis a;
  a.title = title;
  a.lo = std::floor(lo);
  a.hi = std::ceil(hi);
  if (a.hi - a.lo < 1) a.hi = a.lo + 1;
  for (int e = static_cast<int>(a.lo); e <= static_cast<int>(a.hi); ++e) {
    double us = std::pow(10.0, e);
    a.ticks.emplace_back(e, us >= 1e6 ? fmt::format("{:g} s", us / 1e6) : us >= 1e3 ? fmt::format("{:g} ms", us / 1e3)
                                                                                   : fmt::format("{:g} µs", us));
  }
  return a;
}

std::string line_chart(const std::vector<Series>& series, const Axis& x, const Axis& y, const std::string& aria) {
  constexpr double W = 700, H = 320, L = 64, R = 36, T = 14, B = 46;
  auto px = [&](double v) { return L + (x.hi > x.lo ? (v - x.lo) / (x.hi - x.lo) : 0.5) * (W - L - R); };
  auto py = [&](double v) { return H - B - (y.hi > y.lo ? (v - y.lo) / (y.hi - y.lo) : 0.5) * (H - T - B); };
  std::string s = fmt::format(R"(<svg class="chart" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="{}">)",
                              W, H + 22.0 * static_cast<double>((series.size() + 3) / 4), W,
                              H + 22.0 * static_cast<double>((series.size() + 3) / 4), esc(aria));
  s += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="#fcfcfd" stroke="#bbb"/>)", L, T, W - L - R, H - T - B);
  for (const auto& [v, label] : y.ticks) {
    s += fmt::format(R"(<line x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" stroke="#e6e6e6"/>)", L, W - R, py(v), py(v));
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end" class="tick">{}</text>)", L - 6, py(v) + 4, esc(label));
  }
  for (const auto& [v, label] : x.ticks) {
    s += fmt::format(R"(<line x1="{:.1f}" x2="{:.1f}" y1="{:.1f}" y2="{:.1f}" stroke="#e6e6e6"/>)", px(v), px(v), T, H - B);
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" class="tick">{}</text>)", px(v), H - B + 16, esc(label));
  }
  s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" class="axis">{}</text>)", L + (W - L - R) / 2, H - 8,
                   esc(x.title));
  s += fmt::format(R"~(<text transform="translate(14 {:.1f}) rotate(-90)" text-anchor="middle" class="axis">{}</text>)~",
                   T + (H - T - B) / 2, esc(y.title));
  for (const Series& ser : series) {
    std::string points;
    double prev_y = 0;
    for (size_t i = 0; i < ser.points.size(); ++i) {
      const Point& p = ser.points[i];
      if (ser.step && i > 0) points += fmt::format("{:.1f},{:.1f} ", px(p.x), py(prev_y));
      points += fmt::format("{:.1f},{:.1f} ", px(p.x), py(p.y));
      prev_y = p.y;
    }
    if (!points.empty()) points.pop_back();
    s += fmt::format(R"(<polyline class="{}" data-series="{}" data-points="{}" fill="none" stroke="{}" stroke-width="3" )"
                     R"(stroke-linejoin="round" points="{}"/>)",
                     ser.css_class, esc(ser.label), ser.points.size(), ser.colour, points);
    // A marker per point; on a step line only where the point has something to say.
    for (const Point& p : ser.points)
      if (!ser.step || !p.tip.empty())
        s += fmt::format(R"(<circle cx="{:.1f}" cy="{:.1f}" r="{}" fill="{}"><title>{}</title></circle>)", px(p.x), py(p.y),
                         ser.step ? "3" : "4.5", ser.colour, esc(p.tip));
  }
  for (size_t i = 0; i < series.size(); ++i) {  // the legend, four to a line
    double lx = L + static_cast<double>(i % 4) * 150, ly = H + 4 + 22.0 * static_cast<double>(i / 4);
    s += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="14" height="14" fill="{}"/>)", lx, ly, series[i].colour);
    s += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" class="legend">{}</text>)", lx + 19, ly + 12, esc(series[i].label));
  }
  return s + "</svg>";
}

}  // namespace ncclwatch::report
