// A minimal SVG line plot for spray-sim's figures (FCT CDFs, queue depth and goodput
// over time): axes with round ticks, one coloured polyline per series, a legend. No
// dependencies; the output opens in any browser.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace spray::des {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending
};

std::string svg_line_plot(const std::string& title, const std::string& x_label,
                          const std::string& y_label, const std::vector<PlotSeries>& series);

}  // namespace spray::des
