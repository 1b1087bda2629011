#include "congestion/paths/ecmp.h"
#include "congestion/paths/ecmp_repath.h"
#include "congestion/paths/oblivious.h"
#include "congestion/paths/path_selector.h"
#include "congestion/paths/penalty_bitmap.h"
#include "congestion/paths/reps.h"

namespace spray::paths {

std::unique_ptr<PathSelector> make_path_selector(std::string_view name, const PathConfig& config) {
  if (name == "reps" || name.empty()) return std::make_unique<RepsSelector>(config);
  if (name == "oblivious") return std::make_unique<ObliviousSelector>(config);
  if (name == "ecmp") return std::make_unique<EcmpSelector>(config);
  if (name == "ecmp_repath") return std::make_unique<EcmpRepathSelector>(config);
  if (name == "bitmap") return std::make_unique<PenaltyBitmapSelector>(config);
  return nullptr;
}

}  // namespace spray::paths
