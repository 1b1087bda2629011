// AutoDatapath: routing each packet to shared memory or UDP, and buffers back to their
// owner.
#include "transport/datapath/auto/auto_datapath.h"

#include <algorithm>
#include <array>

#include "transport/datapath/clock.h"
#include "transport/datapath/udp/socket_address.h"

namespace spray::dp {
namespace {

constexpr size_t kChunk = 64;  // packets routed per pass; a burst may be longer

}  // namespace

std::unique_ptr<AutoDatapath> AutoDatapath::open(const UdpConfig& udp_config, ShmConfig shm,
                                                 std::string& error) {
  auto udp = UdpDatapath::open(udp_config, error);
  if (!udp) return nullptr;
  const NetAddr name = udp->local_address();
  shm.address = ip_to_string(name);
  shm.port = name.port;
  // Shared-memory buffers hold a local peer's longer packets (host_local_mtu) and any
  // packet for the network, which the engine cuts to UDP's MTU.
  shm.mtu_bytes = std::max(shm.mtu_bytes, udp->mtu());
  shm.shared_socket = udp->wait_fd();
  auto local = ShmDatapath::open(shm, error);
  if (!local) {
    error = "shared memory: " + error;
    return nullptr;
  }
  return std::unique_ptr<AutoDatapath>(new AutoDatapath(std::move(udp), std::move(local)));
}

size_t AutoDatapath::alloc(PacketBuf** bufs, size_t n) {
  const size_t from_shm = shm_->alloc(bufs, n);
  return from_shm + (from_shm < n ? udp_->alloc(bufs + from_shm, n - from_shm) : 0);
}

size_t AutoDatapath::tx_burst(PacketBuf** bufs, size_t n) {
  // Three groups: local peers in shared-memory buffers (lent), remote peers in
  // shared-memory buffers (the kernel copies; then they are ours again), and UDP buffers
  // to anyone (UDP takes them, local peers included: they receive UDP as well).
  std::array<PacketBuf*, kChunk> local, remote_lent, remote_own;
  NetAddr last_peer;  // runs of packets to one peer ask reaches() once
  bool last_local = false, looked_up = false;
  for (size_t done = 0; done < n;) {
    const size_t count = std::min(n - done, kChunk);
    size_t nl = 0, nr = 0, nu = 0;
    for (size_t i = done; i < done + count; ++i) {
      PacketBuf* b = bufs[i];
      if (shm_->owns(b) && (!looked_up || !(b->peer == last_peer))) {
        last_local = shm_->reaches(b->peer);
        last_peer = b->peer;
        looked_up = true;
      }
      if (!shm_->owns(b)) {
        remote_own[nu++] = b;
      } else if (last_local) {
        local[nl++] = b;
      } else {
        remote_lent[nr++] = b;
      }
    }
    if (nl > 0) shm_->tx_burst(local.data(), nl);
    if (nr > 0) {
      udp_->transmit(remote_lent.data(), nr);
      shm_->free(remote_lent.data(), nr);
    }
    if (nu > 0) udp_->tx_burst(remote_own.data(), nu);
    stats_.tx_local += nl;
    stats_.tx_remote += nr + nu;
    done += count;
  }
  return n;
}

size_t AutoDatapath::rx_burst(PacketBuf** bufs, size_t n) {
  size_t got = shm_->rx_burst(bufs, n);
  if (got == n) return got;
  if (udp_empty_polls_ >= kUdpIdlePolls && !idle_udp_poll_due()) {
    ++stats_.udp_polls_skipped;
    return got;
  }
  const size_t first = got;
  const size_t end = first + udp_->rx_burst(bufs + first, n - first);
  // Doorbells count as empty polls: they say a local peer wrote to shared memory.
  bool udp_packets = false;
  for (size_t i = first; i < end; ++i) {
    if (bufs[i]->len == kDoorbellBytes) {  // a local peer woke us; nothing to hand up
      udp_->free(&bufs[i], 1);
      ++stats_.rx_doorbells;
      continue;
    }
    bufs[got++] = bufs[i];
    udp_packets = true;
  }
  udp_empty_polls_ = udp_packets ? 0 : std::min(udp_empty_polls_ + 1, kUdpIdlePolls);
  return got;
}

bool AutoDatapath::idle_udp_poll_due() {
  const bool asked = idle_udp_poll_due_.load(std::memory_order_relaxed);
  if (!asked && ++udp_skipped_ < kUdpClockStride) return false;
  udp_skipped_ = 0;
  const Time now = monotonic_now();
  if (!asked && now - last_idle_udp_poll_ < kUdpIdleInterval) return false;
  if (asked) idle_udp_poll_due_.store(false, std::memory_order_relaxed);
  last_idle_udp_poll_ = now;
  return true;
}

void AutoDatapath::free(PacketBuf** bufs, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (udp_->owns(bufs[i])) {
      udp_->free(&bufs[i], 1);
    } else {
      shm_->free(&bufs[i], 1);
    }
  }
}

bool AutoDatapath::wait(Duration timeout) {
  if (!prepare_wait()) return true;
  return udp_->wait(timeout);
}

}  // namespace spray::dp
