// SecureChannels: UET TSS for one engine. Every packet it sends is sealed with AES-256-GCM
// and every packet it takes must open, or it is dropped and counted (DESIGN.md:
// transport/tss).
//
// Keys. The members of a secure domain share one secret, the domain key (how it reaches
// them is the owner's business: the provider reads FI_SPRAY_TSS_KEY_FILE). Each
// direction of each pair of endpoints gets its own traffic key from it through the KDF
// (key_derivation.h):
//   label   "spray UET TSS pair key v1"
//   context SDI (3) | AN (1) | epoch (2) | source's SSI (4) | source address (23) |
//           destination address (23)      (addresses: family, port, QPN, 16 IP bytes)
// Binding both addresses into the key means a packet recorded on its way to one
// endpoint does not open at any other, and one that claims another source does not
// open at all.
//
// SSI. Each endpoint instance draws a random 32-bit secure source identifier (the
// owner supplies it: the core makes no system calls). It is sent in every header (SP
// set) and is part of the key, so a process that restarts at the same address starts
// from a new key, and its transmit counters starting again from 0 never reuse an IV.
//
// IV and replay. The 12-byte IV is SSI | epoch | TSC, the header's last 12 bytes; the
// TSC (48 bits) counts the packets sent to one destination, so under one key no IV
// repeats. A receiver keeps a ReplayWindow per source. The additional authenticated
// data is the TSS header; the UDP source port (the entropy value) is not covered,
// because the verbs datapath cannot see it on arrival.
//
// Trimming. A switch that trims a packet cuts its tag with its payload, so a trimmed
// packet cannot be authenticated. It is decrypted unverified and the engine uses it only
// as a trim signal (a NACK asking for the packet again), never delivering anything from
// it; a forger could at most cause a retransmission, as dropping a packet would.
//
// Re-keying. A secure domain holds up to two keys at once, one per association number
// (AN, the header's one bit), so that its members can move to a new key without a gap:
// each first installs the new key under the other AN (install_key: packets sealed with
// either key now open), then seals with it (seal_with), and finally retires the old one
// (retire_key: its packets are refused). The pair keys derive from the key of the AN in
// the packet's header. A transmit counter (TSC) runs on per peer and AN across keys: a
// key installed again under the same AN never sees an IV again, and since a receiver's
// replay window (per source instance and AN) also holds across keys, a packet recorded
// under a key does not open again when that key comes back. Each AN's receive key and
// window are kept apart, so packets of both interleave freely while the members move
// over. The epoch is fixed by the configuration: packets of another are
// refused.
//
// Not covered (see README "Known limits"): memory a shared-memory datapath copies
// directly (not on the wire).
//
// Channels are indexed by the engine's PeerIndex and made on first use: the transmit
// key on the first packet sent to a peer, the receive key on the first from it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "transport/datapath/net_addr.h"
#include "transport/tss/aes_gcm.h"
#include "transport/tss/replay_window.h"
#include "transport/wire/tss_header.h"

namespace spray::tss {

struct TssConfig {
  uint32_t domain_index = 1;  // SDI, 24 bits: the secure domain, named in every packet
  Key domain_key{};           // the domain's secret, under `association`, which seals
  bool association = false;   // AN of domain_key (install_key adds the other)
  uint16_t epoch = 0;         // packets of another epoch are refused
  uint32_t source_id = 0;     // SSI: this endpoint instance's own random value
};

struct TssStats {
  uint64_t sealed = 0;
  uint64_t opened = 0;
  uint64_t sealed_an1 = 0;          // of `sealed`: with the key of association 1
  uint64_t opened_an1 = 0;          // of `opened`: with the key of association 1
  uint64_t rx_not_secured = 0;      // no TSS header, or too short to hold one and a tag
  uint64_t rx_other_domain = 0;     // another SDI or epoch, an AN without key, or no SSI
  uint64_t rx_replayed = 0;         // TSC seen already, or older than the replay window
  uint64_t rx_forged = 0;           // the tag did not match: altered, or not of our domain key
  uint64_t rx_trimmed = 0;          // trimmed: decrypted unverified, used as a trim signal only
  uint64_t rx_trimmed_unknown = 0;  // trimmed, from a source we hold no key for: dropped
  uint64_t tx_failed = 0;           // not sealed (TSC space used up, or OpenSSL failed): dropped
};

enum class OpenResult : uint8_t {
  kOpened,   // authentic and fresh: the plaintext is the engine's to handle
  kTrimmed,  // decrypted unverified (see above)
  kDropped,  // counted in TssStats by reason
};

// What SecureChannels keeps per peer and association number (at namespace scope rather
// than nested, so that std::optional<PeerChannel> may be used inside the class).
struct PeerChannel {
  struct Association {
    AesGcm tx;              // keyed on first use; again after the AN's key changed
    uint64_t next_tsc = 0;  // never goes back, whatever the key (see Re-keying)
    AesGcm rx;              // keyed for rx_source_id
    uint32_t rx_source_id = 0;
    ReplayWindow window;  // of rx_source_id's key
  };
  std::array<Association, 2> an;
};

class SecureChannels {
 public:
  static constexpr uint32_t kHeaderBytes = wire::kTssWithSsiBytes;
  static constexpr uint32_t kIcvBytes = wire::kTssIcvBytes;
  static constexpr uint32_t kOverheadBytes = kHeaderBytes + kIcvBytes;
  static constexpr uint32_t kUnknownPeer = 0xffffffff;

  SecureChannels(const TssConfig& config, const dp::NetAddr& local);
  ~SecureChannels();  // wipes its copy of the domain key
  SecureChannels(const SecureChannels&) = delete;
  SecureChannels& operator=(const SecureChannels&) = delete;

  // Seals in place the packet for `peer` (at `addr`). Its plaintext, from the PDS header
  // on, lies at packet[kHeaderBytes, kHeaderBytes + plain_bytes) and `gathered` follows it
  // on the wire (encrypted into the buffer behind it); `packet` must hold kOverheadBytes
  // more than both. Returns the sealed length, or 0 when it cannot be sent (counted).
  uint32_t seal(uint32_t peer, const dp::NetAddr& addr, std::span<uint8_t> packet,
                uint32_t plain_bytes, std::span<const uint8_t> gathered = {});

  struct Opened {
    OpenResult result = OpenResult::kDropped;
    uint32_t plain_bytes = 0;  // at packet.data() + kHeaderBytes
  };
  // Opens a received packet in place. `peer` is the engine's index of its source, or
  // kUnknownPeer: then the channel made for it waits for settle().
  Opened open(uint32_t peer, const dp::NetAddr& source, std::span<uint8_t> packet, bool trimmed);
  // After the engine handled a packet opened from an unknown source: the index it gave
  // that source (which keeps the channel), or kUnknownPeer (the channel is forgotten).
  void settle(uint32_t peer);

  // Re-keying (see above). install_key puts `key` under `association` (a key equal to the
  // one there changes nothing); the channels of that AN derive their keys again. seal_with
  // seals from now on with the key of `association`: false when it has none. retire_key
  // forgets the key of `association` and what was derived from it: false when it is the
  // one sealing (move sealing first). The caller's `key` is not wiped.
  void install_key(bool association, const Key& key);
  bool seal_with(bool association);
  bool retire_key(bool association);
  bool sealing_association() const { return sealing_; }
  bool has_key(bool association) const { return keys_[association].has_value(); }

  const TssStats& stats() const { return stats_; }
  size_t memory_bytes() const { return channels_.capacity() * sizeof(Channel); }

 private:
  using Channel = PeerChannel;
  Channel& channel(uint32_t peer);
  // A context keyed with the traffic key from `source` (whose SSI is `source_id`) to
  // `destination`; the key itself is wiped once the context holds it. Invalid when
  // OpenSSL fails.
  AesGcm pair_context(bool association, uint32_t source_id, const dp::NetAddr& source,
                      const dp::NetAddr& destination, AesGcm::Direction direction) const;
  // Drops every context derived from the key of `association` (transmit counters, and
  // each source's SSI and replay window, stay).
  void forget_derived(bool association);

  TssConfig cfg_;  // its domain_key is wiped at once: keys_ holds the keys
  dp::NetAddr local_;
  std::array<std::optional<Key>, 2> keys_;  // by AN
  bool sealing_ = false;                    // the AN packets are sealed with
  std::vector<Channel> channels_;           // by PeerIndex
  std::optional<Channel> pending_;          // of an unknown source, until settle()
  TssStats stats_;
};

}  // namespace spray::tss
