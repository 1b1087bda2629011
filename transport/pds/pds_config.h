// Knobs of the packet delivery sublayer. Units are in the names.
#pragma once

#include <cstdint>
#include <string>

#include "congestion/cc/congestion_control.h"
#include "congestion/paths/path_selector.h"
#include "transport/base/time.h"

namespace spray::pds {

struct PdsConfig {
  uint32_t max_pdcs = 1024;  // PDCs this engine can hold at once (both roles)
  // Target PDCs one peer may hold open here. A genuine initiator needs one per mode; the
  // cap stops one source (a broken or forged one, whose every SYN names a new PDC) from
  // filling the table for everyone else. SYNs beyond it get NACK kNoPdcAvailable.
  uint32_t max_target_pdcs_per_peer = 16;
  // A send to a peer with no PDC while the table is full waits for one (the least
  // recently active idle PDC is closed to make room, see pds_reclaim.cc) at most this
  // long, then fails with kNoPdcAvailable.
  Duration pdc_wait = Duration::seconds(1);
  uint32_t window_packets = 512;  // max PSNs in flight per PDC; a power of two
  // Retransmission timeout: `initial_rto` until a PDC has an RTT sample, then
  // SRTT + 4 * RTTVAR (RFC 6298); always within [min_rto, max_rto] before backoff doubles it
  // (backoff stops at max_rto).
  Duration initial_rto = Duration::microseconds(200);
  Duration min_rto = Duration::microseconds(100);
  Duration max_rto = Duration::milliseconds(20);
  uint32_t max_retries = 12;  // transmissions of one PSN beyond the first; at most 100
  Duration reorder_window = Duration::microseconds(20);  // RACK: least tolerated reordering
  uint32_t ack_every_packets = 16;                       // coalescing: ACK at least this often
  // A held ACK (Pdc::ack_may_wait) waits for a step that sends something, to leave in
  // its burst, at most this long; then a step sends it alone. Well under min_rto, so
  // that its sender's timer does not fire for it while the target keeps calling.
  Duration ack_hold_limit = Duration::microseconds(25);
  // Memory held per engine regardless of load (the simulator runs thousands of engines
  // and sizes these down): timer-wheel buckets of 1 us, and control packets reserved for.
  uint32_t timer_slots = 4096;
  uint32_t control_reserve = 1024;
  // Reports (acknowledged, failed) reserved for; 0: twice the window, so that no ACK,
  // however much it covers, grows the lists on the fast path.
  uint32_t report_reserve = 0;
  // Closed target PDCs remembered, so a late duplicate SYN cannot reopen one and replay
  // its data.
  uint32_t closed_pdcs_remembered = 256;
  std::string cc_name = "nscc";
  std::string path_name = "reps";
  cc::CcConfig cc{};
  uint16_t entropy_count = 256;
  uint16_t reps_cache = 32;  // REPS's recycling ring, 1..32 (see congestion/paths/reps.h)
  uint64_t seed = 1;         // seeds start PSNs and path exploration
};

}  // namespace spray::pds
