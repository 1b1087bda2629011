#include "congestion/cc/congestion_control.h"
#include "congestion/cc/dcqcn.h"
#include "congestion/cc/fixed_window.h"
#include "congestion/cc/nscc.h"
#include "congestion/cc/rccc.h"

namespace spray::cc {

std::unique_ptr<CongestionControl> make_congestion_control(std::string_view name,
                                                           const CcConfig& config) {
  if (name == "nscc" || name.empty()) return std::make_unique<Nscc>(config);
  if (name == "fixed") return std::make_unique<FixedWindow>(config);
  if (name == "rccc") return std::make_unique<Rccc>(config);
  if (name == "dcqcn") return std::make_unique<Dcqcn>(config);
  if (name == "nscc_rccc") return std::make_unique<NsccRccc>(config);
  return nullptr;
}

}  // namespace spray::cc
