// The warning an endpoint logs when its operations fail because a PDC failed: to which
// peer and why (PDS's PdcFailureRecord), so that FI_EHOSTUNREACH is not all a user sees.
#include <string>

#include <fmt/format.h>

#include "provider/endpoint.h"

namespace spray::fi {

void warn_of_failed_pdcs(Endpoint& ep) {
  const uint64_t failed = ep.engine->pdcs_failed();
  if (failed == ep.pdc_failures_logged) return;
  const uint64_t new_ones = failed - ep.pdc_failures_logged;
  ep.pdc_failures_logged = failed;
  const pds::PdcFailureRecord last = ep.engine->last_pdc_failure();
  std::string detail;
  if (last.why == pds::PdcFailure::kUnanswered) {
    detail = fmt::format(" ({} tries; FI_SPRAY_RETRIES={}, FI_SPRAY_RTO_MAX_MS={})", last.tries,
                         params().retries, params().rto_max_ms);
  } else if (last.why == pds::PdcFailure::kUnknownAtPeer) {
    detail = fmt::format(" (NACK {})", wire::to_string(last.nack));
  }
  SPRAY_WARN(FI_LOG_EP_DATA,
             "endpoint %s: PDC to %s failed: %s%s; %lu failed since the last such "
             "warning, %lu in all\n",
             ep.engine->local_address().to_string().c_str(),
             ep.engine->peer_address(last.peer).to_string().c_str(), pds::to_string(last.why),
             detail.c_str(), static_cast<unsigned long>(new_ones),
             static_cast<unsigned long>(failed));
}

}  // namespace spray::fi
