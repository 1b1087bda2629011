#include "transport/tss/secure_channels.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "transport/tss/key_derivation.h"

namespace spray::tss {
namespace {

constexpr char kLabel[] = "spray UET TSS pair key v1";
constexpr size_t kAddressBytes = 23;  // family, port, QPN, 16 IP bytes
constexpr size_t kContextBytes = 3 + 1 + 2 + 4 + 2 * kAddressBytes;

uint8_t* put_be(uint8_t* at, uint64_t value, size_t bytes) {
  for (size_t i = bytes; i-- > 0;) {
    at[i] = static_cast<uint8_t>(value);
    value >>= 8;
  }
  return at + bytes;
}

uint8_t* put_address(uint8_t* at, const dp::NetAddr& a) {
  *at++ = static_cast<uint8_t>(a.family);
  at = put_be(at, a.port, 2);
  at = put_be(at, a.qpn, 4);
  std::memcpy(at, a.ip.data(), a.ip.size());
  return at + a.ip.size();
}

// The IV is the header's last 12 bytes: SSI | epoch | TSC.
Iv iv_of(std::span<const uint8_t> header) {
  Iv iv;
  std::memcpy(iv.data(), header.data() + SecureChannels::kHeaderBytes - kIvBytes, kIvBytes);
  return iv;
}

}  // namespace

SecureChannels::SecureChannels(const TssConfig& config, const dp::NetAddr& local)
    : cfg_(config), local_(local), sealing_(config.association) {
  keys_[sealing_] = cfg_.domain_key;
  wipe(cfg_.domain_key);
}

SecureChannels::~SecureChannels() {
  for (auto& key : keys_) {
    if (key) wipe(*key);
  }
}

AesGcm SecureChannels::pair_context(bool association, uint32_t source_id, const dp::NetAddr& source,
                                    const dp::NetAddr& destination,
                                    AesGcm::Direction direction) const {
  if (!keys_[association]) return AesGcm();
  std::array<uint8_t, kContextBytes> context{};
  uint8_t* at = put_be(context.data(), cfg_.domain_index, 3);
  *at++ = association ? 1 : 0;
  at = put_be(at, cfg_.epoch, 2);
  at = put_be(at, source_id, 4);
  at = put_address(at, source);
  put_address(at, destination);
  Key key;
  const auto label = std::span(reinterpret_cast<const uint8_t*>(kLabel), sizeof(kLabel) - 1);
  AesGcm gcm =
      derive_key(*keys_[association], label, context, key) ? AesGcm(key, direction) : AesGcm();
  wipe(key);
  return gcm;
}

SecureChannels::Channel& SecureChannels::channel(uint32_t peer) {
  if (peer >= channels_.size()) channels_.resize(size_t{peer} + 1);
  return channels_[peer];
}

uint32_t SecureChannels::seal(uint32_t peer, const dp::NetAddr& addr, std::span<uint8_t> packet,
                              uint32_t plain_bytes, std::span<const uint8_t> gathered) {
  PeerChannel::Association& c = channel(peer).an[sealing_];
  if (!c.tx.valid()) {
    c.tx = pair_context(sealing_, cfg_.source_id, local_, addr, AesGcm::Direction::kSeal);
  }
  const size_t total = size_t{kOverheadBytes} + plain_bytes + gathered.size();
  if (!c.tx.valid() || c.next_tsc > wire::kMaxTsc || packet.size() < total) {
    ++stats_.tx_failed;
    return 0;
  }
  const wire::TssHeader h{.sdi = cfg_.domain_index,
                          .association = sealing_,
                          .has_ssi = true,
                          .ssi = cfg_.source_id,
                          .epoch = cfg_.epoch,
                          .tsc = c.next_tsc++};
  wire::encode(h, packet);
  const auto header = packet.first(kHeaderBytes);
  const auto text = packet.subspan(kHeaderBytes, plain_bytes);
  const auto tag = packet.subspan(kHeaderBytes + plain_bytes + gathered.size()).first<kIcvBytes>();
  if (!c.tx.seal(iv_of(header), header, text, gathered, tag)) {
    ++stats_.tx_failed;
    return 0;
  }
  ++stats_.sealed;
  if (sealing_) ++stats_.sealed_an1;
  return static_cast<uint32_t>(total);
}

SecureChannels::Opened SecureChannels::open(uint32_t peer, const dp::NetAddr& source,
                                            std::span<uint8_t> packet, bool trimmed) {
  wire::TssHeader h;
  if (wire::decode(packet, h) != wire::DecodeError::kOk ||
      packet.size() < (trimmed ? kHeaderBytes : kOverheadBytes)) {
    ++stats_.rx_not_secured;
    return {};
  }
  if (!h.has_ssi || h.sdi != cfg_.domain_index || !keys_[h.association] || h.epoch != cfg_.epoch) {
    ++stats_.rx_other_domain;
    return {};
  }
  Channel* channel_of_source = nullptr;
  if (peer == kUnknownPeer) {
    pending_.emplace();
    channel_of_source = &*pending_;
  } else {
    channel_of_source = &channel(peer);
  }
  PeerChannel::Association* c = &channel_of_source->an[h.association];
  const auto header = packet.first(kHeaderBytes);
  const Iv iv = iv_of(header);
  // The window is of the source instance (its SSI), whose TSCs under this AN never go
  // back, whatever the key: it holds across a key installed again (see Re-keying).
  const bool same_instance = c->rx_source_id == h.ssi;
  const bool same_source = same_instance && c->rx.valid();  // its key is at hand

  if (trimmed) {
    // No tag to check, so no key is made for it: only a known source's trim counts.
    const auto text = packet.subspan(kHeaderBytes);
    if (!same_source || !c->rx.decrypt_unverified(iv, text)) {
      ++stats_.rx_trimmed_unknown;
      return {};
    }
    ++stats_.rx_trimmed;
    return {OpenResult::kTrimmed, static_cast<uint32_t>(text.size())};
  }

  const auto text = packet.subspan(kHeaderBytes, packet.size() - kOverheadBytes);
  const auto tag = packet.last<kIcvBytes>();
  if (same_instance && !c->window.fresh(h.tsc)) {
    ++stats_.rx_replayed;
    return {};
  }
  if (same_source) {
    if (!c->rx.open(iv, header, text, tag)) {
      ++stats_.rx_forged;
      return {};
    }
  } else {
    // A first packet from this source, from a new instance of it (another SSI), or under
    // a key just installed: the channel takes the new key (and, for a new instance, a new
    // window) only once a packet opens with it.
    AesGcm rx = pair_context(h.association, h.ssi, source, local_, AesGcm::Direction::kOpen);
    if (!rx.open(iv, header, text, tag)) {
      ++stats_.rx_forged;
      return {};
    }
    c->rx = std::move(rx);
    if (!same_instance) c->window = ReplayWindow();
    c->rx_source_id = h.ssi;
  }
  c->window.accept(h.tsc);
  ++stats_.opened;
  if (h.association) ++stats_.opened_an1;
  return {OpenResult::kOpened, static_cast<uint32_t>(text.size())};
}

void SecureChannels::settle(uint32_t peer) {
  if (!pending_) return;
  // Only a receive key a packet opened with is kept (a pending channel whose packet was
  // refused has none, and must not replace one the peer's channel may hold).
  if (peer != kUnknownPeer) {
    for (size_t an = 0; an < 2; ++an) {
      PeerChannel::Association& from = pending_->an[an];
      if (!from.rx.valid()) continue;
      PeerChannel::Association& c = channel(peer).an[an];
      c.rx = std::move(from.rx);
      c.rx_source_id = from.rx_source_id;
      c.window = from.window;
    }
  }
  pending_.reset();
}

void SecureChannels::forget_derived(bool association) {
  for (Channel& channel : channels_) {
    channel.an[association].tx = AesGcm();
    channel.an[association].rx = AesGcm();  // its source and window stay: see open()
  }
  pending_.reset();
}

void SecureChannels::install_key(bool association, const Key& key) {
  if (keys_[association] == key) return;
  if (keys_[association]) wipe(*keys_[association]);
  keys_[association] = key;
  forget_derived(association);
}

bool SecureChannels::seal_with(bool association) {
  if (!keys_[association]) return false;
  sealing_ = association;
  return true;
}

bool SecureChannels::retire_key(bool association) {
  if (association == sealing_) return false;
  if (keys_[association]) wipe(*keys_[association]);
  keys_[association].reset();
  forget_derived(association);
  return true;
}

}  // namespace spray::tss
