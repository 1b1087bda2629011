// The Datapath concept (DESIGN.md decision 4): how the engine moves packets.
//
// Burst-oriented, like eRPC's Transport: the engine allocates a batch of buffers,
// fills them and hands them to tx_burst; it pulls a batch from rx_burst and frees it.
// The engine is templated on the datapath, so there is no virtual call per packet.
// Backends: udp/, dpdk/, verbs/ (later issues) and nic_sim's simulated NIC.
//
// Ownership: alloc() hands buffers to the caller; tx_burst() takes them all back
// (a full queue drops, exactly as a NIC would; reliability is PDS's job); rx_burst()
// hands received buffers to the caller, who returns them with free().
//
// Optional: `static constexpr bool kGathersPayload = true` for datapaths that send
// PacketBuf::payload from where it lies (scatter-gather), saving the engine a copy.
//
// Optional: `static constexpr bool kHidesArrivalEntropy = true` for datapaths whose
// received PacketBuf::entropy is not the EV the sender chose (verbs UD: the RoCE UDP
// source port is not visible). The engine then sprays ACKs and NACKs over EVs in turn
// instead of returning each on the EV its request arrived on.
//
// Optional: `uint16_t entropy_values() const`, for datapaths that carry fewer distinct
// EVs than PDS would use (UDP and DPDK: one source port per EV mod entropy_ports). EVs
// e and e + entropy_values() then take the same paths and arrive as the same value, so
// the engine uses no more than that many: its path selector learns each path under one
// name, and an ACK's arrival EV can be matched with the EV its trigger was sent on.
//
// Optional: `PacketBuf* keep(PacketBuf*)`, for datapaths that lend received packets out
// of a larger shared buffer (UDP GRO). A caller that holds a received buffer beyond the
// current burst (the engine's reordering of ROD packets) first swaps it for keep()'s
// result, so the hold does not pin the rest of that shared buffer.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "transport/datapath/net_addr.h"

namespace spray::dp {

// One packet buffer. `data` holds the UET packet from the PDS header on; link, IP and
// UDP framing are the datapath's business.
struct PacketBuf {
  uint8_t* data = nullptr;
  uint32_t len = 0;        // valid bytes at data
  uint32_t capacity = 0;   // bytes available at data
  NetAddr peer;            // tx: destination; rx: source
  uint16_t entropy = 0;    // tx: the EV to send on (UDP source port); rx: as received
  uint8_t flags = 0;       // rx flags below
  uint32_t owner_tag = 0;  // reserved for the datapath (pool index, mbuf slot, ...)
  // tx only, and only for datapaths that declare kGathersPayload: `payload_len` bytes at
  // `payload` follow data[0, len) on the wire, gathered from the sender's memory instead
  // of copied into the buffer. That memory must stay unchanged until tx_burst returns.
  const uint8_t* payload = nullptr;
  uint32_t payload_len = 0;

  static constexpr uint8_t kTrimmed = 0x01;  // a switch cut the payload (UET trimming)
  static constexpr uint8_t kEcnCe = 0x02;    // congestion experienced was marked
};

template <class D>
concept Datapath = requires(D& d, const D& cd, PacketBuf** bufs, size_t n) {
  { d.alloc(bufs, n) } -> std::same_as<size_t>;     // returns how many it could give
  { d.tx_burst(bufs, n) } -> std::same_as<size_t>;  // takes all; returns how many left
  { d.rx_burst(bufs, n) } -> std::same_as<size_t>;
  { d.free(bufs, n) } -> std::same_as<void>;
  { cd.mtu() } -> std::same_as<uint32_t>;  // max bytes at PacketBuf::data
  { cd.local_address() } -> std::same_as<NetAddr>;
};

}  // namespace spray::dp
