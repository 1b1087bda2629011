#include "nic_sim/des/svg_plot.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace spray::des {
namespace {

constexpr double kWidth = 720, kHeight = 440;
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 60;
constexpr const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                    "#9467bd", "#8c564b", "#e377c2", "#17becf"};

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `ticks` ticks.
double tick_step(double span, int ticks) {
  if (span <= 0) return 1;
  const double raw = span / ticks, power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (raw <= m * power) return m * power;
  }
  return 10 * power;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '&') {
      out += "&amp;";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string svg_line_plot(const std::string& title, const std::string& x_label,
                          const std::string& y_label, const std::vector<PlotSeries>& series) {
  double x0 = 1e300, x1 = -1e300, y0 = 0, y1 = -1e300;
  for (const auto& s : series) {
    for (const auto& [x, y] : s.points) {
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  }
  if (x0 > x1) {  // no points
    x0 = 0;
    x1 = 1;
  }
  if (y1 <= y0) y1 = y0 + 1;
  if (x1 <= x0) x1 = x0 + 1;
  const double dx = tick_step(x1 - x0, 6), dy = tick_step(y1 - y0, 5);
  x0 = std::floor(x0 / dx) * dx;
  x1 = std::ceil(x1 / dx) * dx;
  y1 = std::ceil(y1 / dy) * dy;
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + ph - (y - y0) / (y1 - y0) * ph; };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n<text x=\"{}\" y=\"22\" text-anchor=\"middle\" "
      "font-size=\"15\">{}</text>\n",
      kWidth, kHeight, kWidth / 2, escape(title));
  for (double x = x0; x <= x1 + dx / 2; x += dx) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{0:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4:g}</text>\n",
        px(x), kTop, kTop + ph, kTop + ph + 16, x);
  }
  for (double y = y0; y <= y1 + dy / 2; y += dy) {
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
        kLeft, py(y), kLeft + pw, kLeft - 6, py(y) + 4, y);
  }
  svg += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"black\"/>\n"
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n"
      "<text transform=\"translate(18,{}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
      kLeft, kTop, pw, ph, kLeft + pw / 2, kHeight - 18, escape(x_label), kTop + ph / 2,
      escape(y_label));
  for (size_t i = 0; i < series.size(); ++i) {
    const char* colour = kColours[i % std::size(kColours)];
    std::string points;
    for (const auto& [x, y] : series[i].points)
      points += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    svg +=
        fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\" points=\"{}\"/>\n",
                    colour, points);
    const double ly = kTop + 14 + 16 * static_cast<double>(i);
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1:.1f}\" x2=\"{2:.1f}\" y2=\"{1:.1f}\" stroke=\"{3}\" "
        "stroke-width=\"3\"/><text x=\"{4:.1f}\" y=\"{5:.1f}\">{6}</text>\n",
        kLeft + pw - 130, ly, kLeft + pw - 110, colour, kLeft + pw - 104, ly + 4,
        escape(series[i].name));
  }
  return svg + "</svg>\n";
}

}  // namespace spray::des
