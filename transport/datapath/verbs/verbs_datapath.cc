// VerbsDatapath fast path: one linked post per burst, batched CQ polling, batched
// receive reposting.
#include <infiniband/verbs.h>
#include <poll.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "transport/datapath/verbs/verbs_datapath.h"

namespace spray::dp {
namespace {

constexpr size_t kMaxBurst = 64;

uint64_t to_wr_id(PacketBuf* b) {
  return reinterpret_cast<uint64_t>(b);
}
PacketBuf* from_wr_id(uint64_t id) {
  return reinterpret_cast<PacketBuf*>(id);
}

}  // namespace

size_t VerbsDatapath::alloc(PacketBuf** bufs, size_t n) {
  size_t i = 0;
  for (; i < n && (bufs[i] = pool_.alloc()) != nullptr; ++i) bufs[i]->capacity = mtu_;
  return i;
}

void VerbsDatapath::free(PacketBuf** bufs, size_t n) {
  for (size_t i = 0; i < n; ++i) pool_.release(bufs[i]);
}

void VerbsDatapath::post_receives() {
  std::array<ibv_recv_wr, kMaxBurst> wrs{};
  std::array<ibv_sge, kMaxBurst> sges{};
  while (posted_receives_ < cfg_.recv_depth) {
    size_t n = 0;
    for (; n < kMaxBurst && posted_receives_ + n < cfg_.recv_depth; ++n) {
      PacketBuf* b = pool_.alloc();
      if (b == nullptr) break;
      sges[n] = {reinterpret_cast<uint64_t>(b->data - kGrhBytes), mtu_ + kGrhBytes, mr_->lkey};
      wrs[n] = {};
      wrs[n].wr_id = to_wr_id(b);
      wrs[n].sg_list = &sges[n];
      wrs[n].num_sge = 1;
      if (n > 0) wrs[n - 1].next = &wrs[n];
    }
    if (n == 0) return;
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(qp_, wrs.data(), &bad) != 0) {
      // Return what was not posted; try again on the next rx_burst.
      for (ibv_recv_wr* w = bad; w != nullptr; w = w->next) pool_.release(from_wr_id(w->wr_id));
      return;
    }
    posted_receives_ += static_cast<uint32_t>(n);
  }
}

size_t VerbsDatapath::deliver(const ibv_wc* wc, size_t count, PacketBuf** bufs, size_t n) {
  size_t kept = 0;
  for (size_t i = 0; i < count && kept < n; ++i) {
    PacketBuf* b = from_wr_id(wc[i].wr_id);
    --posted_receives_;
    if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len < kGrhBytes) {
      ++stats_.rx_errors;
      pool_.release(b);
      continue;
    }
    const uint8_t* grh = b->data - kGrhBytes;
    b->len = wc[i].byte_len - kGrhBytes;
    b->peer = {};
    b->peer.family = NetAddr::Family::kVerbs;
    b->peer.qpn = wc[i].src_qp;
    if (ipv4_roce_) {
      // ::ffff:a.b.c.d from the IPv4 header's source address (header at byte 20).
      b->peer.ip[10] = 0xff;
      b->peer.ip[11] = 0xff;
      std::memcpy(b->peer.ip.data() + 12, grh + 20 + 12, 4);
    } else {
      std::memcpy(b->peer.ip.data(), grh + 8, 16);  // the GRH's source GID
    }
    b->entropy = 0;
    b->flags = 0;
    bufs[kept++] = b;
  }
  return kept;
}

size_t VerbsDatapath::rx_burst(PacketBuf** bufs, size_t n) {
  reap_sends();
  size_t kept = 0;
  if (stash_count_ > 0) {
    // deliver() takes stashed completions in order; n >= stash is the usual case.
    const size_t take = std::min(stash_count_, n);
    kept = deliver(stash_.get(), take, bufs, n);
    std::memmove(stash_.get(), stash_.get() + take, (stash_count_ - take) * sizeof(ibv_wc));
    stash_count_ -= take;
  }
  if (kept < n && stash_count_ == 0) {
    std::array<ibv_wc, kMaxBurst> wc{};
    const int got =
        ibv_poll_cq(recv_cq_, static_cast<int>(std::min(n - kept, kMaxBurst)), wc.data());
    if (got > 0) kept += deliver(wc.data(), static_cast<size_t>(got), bufs + kept, n - kept);
  }
  stats_.rx_packets += kept;
  post_receives();
  return kept;
}

void VerbsDatapath::reap_sends() {
  std::array<ibv_wc, kMaxBurst> wc{};
  int got = 0;
  while ((got = ibv_poll_cq(send_cq_, static_cast<int>(kMaxBurst), wc.data())) > 0) {
    for (size_t i = 0; i < static_cast<size_t>(got); ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) ++stats_.tx_errors;
      pool_.release(from_wr_id(wc[i].wr_id));
    }
    outstanding_sends_ -= static_cast<uint32_t>(got);
  }
}

ibv_ah* VerbsDatapath::address_handle(const NetAddr& peer, uint16_t entropy) {
  const uint16_t cls = static_cast<uint16_t>(entropy % cfg_.entropy_classes);
  const uint64_t key = peer.hash() ^ (uint64_t{cls} * 0x9e3779b97f4a7c15ULL);
  if (auto it = ahs_.find(key); it != ahs_.end()) return it->second;
  ibv_ah_attr attr{};
  attr.is_global = 1;
  std::memcpy(attr.grh.dgid.raw, peer.ip.data(), 16);
  attr.grh.sgid_index = static_cast<uint8_t>(cfg_.gid_index);
  attr.grh.hop_limit = 64;
  attr.grh.flow_label = 1u + cls;  // RoCEv2: the UDP source port follows the flow label
  attr.port_num = cfg_.port;
  ibv_ah* ah = ibv_create_ah(pd_, &attr);
  if (ah != nullptr) ahs_.emplace(key, ah);
  return ah;
}

size_t VerbsDatapath::tx_burst(PacketBuf** bufs, size_t n) {
  reap_sends();
  std::array<ibv_send_wr, kMaxBurst> wrs{};
  std::array<ibv_sge, kMaxBurst> sges{};
  size_t done = 0;
  while (done < n) {
    size_t count = 0;
    for (; count < kMaxBurst && done + count < n; ++count) {
      PacketBuf* b = bufs[done + count];
      ibv_ah* ah = address_handle(b->peer, b->entropy);
      if (ah == nullptr || outstanding_sends_ + count >= cfg_.send_depth) break;
      sges[count] = {reinterpret_cast<uint64_t>(b->data), b->len, mr_->lkey};
      wrs[count] = {};
      wrs[count].wr_id = to_wr_id(b);
      wrs[count].sg_list = &sges[count];
      wrs[count].num_sge = 1;
      wrs[count].opcode = IBV_WR_SEND;
      wrs[count].send_flags = IBV_SEND_SIGNALED;
      wrs[count].wr.ud.ah = ah;
      wrs[count].wr.ud.remote_qpn = b->peer.qpn;
      wrs[count].wr.ud.remote_qkey = cfg_.qkey;
      if (count > 0) wrs[count - 1].next = &wrs[count];
    }
    if (count == 0) {
      // No address handle or a full send queue: drop the rest; PDS recovers it.
      for (size_t i = done; i < n; ++i) pool_.release(bufs[i]);
      stats_.tx_dropped += n - done;
      return n;
    }
    ibv_send_wr* bad = nullptr;
    if (ibv_post_send(qp_, wrs.data(), &bad) != 0) {
      size_t dropped = 0;
      for (ibv_send_wr* w = bad; w != nullptr; w = w->next, ++dropped) {
        pool_.release(from_wr_id(w->wr_id));
      }
      stats_.tx_dropped += dropped;
      outstanding_sends_ += static_cast<uint32_t>(count - dropped);
      stats_.tx_packets += count - dropped;
    } else {
      outstanding_sends_ += static_cast<uint32_t>(count);
      stats_.tx_packets += count;
    }
    done += count;
  }
  return n;
}

bool VerbsDatapath::prepare_wait() {
  // Consume the events the descriptor holds (it is non-blocking), then arm for the next.
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (ibv_get_cq_event(channel_, &cq, &context) == 0) ibv_ack_cq_events(cq, 1);
  if (ibv_req_notify_cq(recv_cq_, 0) != 0) return false;
  // A completion that arrived before arming raises no event: look once more.
  if (stash_count_ == 0) {
    const int got = ibv_poll_cq(recv_cq_, static_cast<int>(kStashMax), stash_.get());
    if (got > 0) stash_count_ = static_cast<size_t>(got);
  }
  return stash_count_ == 0;
}

int VerbsDatapath::wait_fd() const {
  return channel_->fd;
}

bool VerbsDatapath::wait(Duration timeout) {
  if (!prepare_wait()) return true;
  pollfd p{channel_->fd, POLLIN, 0};
  const auto ms = static_cast<int>((timeout.ps + 999'999'999) / 1'000'000'000);
  return ::poll(&p, 1, ms) > 0;
}

}  // namespace spray::dp
