// ShmDatapath fast path: buffers lent to receivers and taken back, descriptor rings,
// and the sleep/doorbell handshake.
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

#include <algorithm>
#include <atomic>
#include <memory>
#include <new>

#include "transport/datapath/shm/shm_datapath.h"

#include "transport/base/copy_bytes.h"
#include "transport/datapath/shm/short_distance_reads.h"

namespace spray::dp {

size_t ShmDatapath::alloc(PacketBuf** bufs, size_t n) {
  // Take back what receivers returned before taking more from the free stack, so the
  // buffers in use stay a hot set (kReclaimAtLent). Reclaiming only when the stack ran
  // dry walked the packets through all `buffers` in turn (17 MB), each first use a page
  // fault on both sides: a 4-rank 4 KiB all-reduce took 60 us for its first 250 calls
  // and 25 us from about the 1000th on. While receivers hold on to that many, the scan
  // (one load per lent buffer) runs once per kReclaimStride packets, not per packet.
  if (lent_.size() >= next_reclaim_at_) {
    reclaim();
    next_reclaim_at_ = std::max(kReclaimAtLent, lent_.size() + kReclaimStride);
  }
  size_t i = 0;
  for (; i < n; ++i) {
    if (tx_free_.empty()) reclaim();
    if (tx_free_.empty()) break;
    PacketBuf* b = &tx_bufs_[tx_free_.back()];
    tx_free_.pop_back();
    b->len = 0;
    b->flags = 0;
    b->entropy = 0;
    bufs[i] = b;
  }
  return i;
}

void ShmDatapath::free(PacketBuf** bufs, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint32_t tag = bufs[i]->owner_tag;
    if ((tag & kViewTag) == 0) {  // one of ours that was never sent
      tx_free_.push_back(tag);
      continue;
    }
    const uint32_t view = tag & ~kViewTag;
    // Release: our reads of the packet happen before the sender may reuse the buffer.
    rx_lent_flag_[view]->store(0, std::memory_order_release);
    const auto region = static_cast<uint32_t>(rx_region_[view]);
    if (--region_views_[region] == 0 && regions_[region].gone) unmap_region(region);
    rx_free_.push_back(view);
  }
}

size_t ShmDatapath::tx_burst(PacketBuf** bufs, size_t n) {
  std::atomic<uint32_t>* lent = layout_.lent(base_);
  // The previous packet's peer and outbox (-1: unreachable), so a burst to one peer looks
  // it up once, and one to an unreachable peer tries to map its region once.
  NetAddr last_peer;
  int32_t o = -1;  // the outbox of bufs[i]
  bool looked_up = false;
  for (size_t i = 0; i < n; ++i) {
    PacketBuf* b = bufs[i];
    const uint32_t buffer = b->owner_tag;
    if (!looked_up || !(b->peer == last_peer) ||
        (o >= 0 && outboxes_[static_cast<size_t>(o)].dead)) {
      o = outbox_for(b->peer);
      last_peer = b->peer;
      looked_up = true;
    }
    if (o < 0 || b->len == 0 || b->len > layout_.mtu_bytes) {
      ++stats_.tx_dropped;
      if (o < 0) ++stats_.tx_unreachable;
      tx_free_.push_back(buffer);
      continue;
    }
    Outbox& out = outboxes_[static_cast<size_t>(o)];
    const uint32_t entries = regions_[out.region].layout.ring_entries;
    if (out.head - out.tail_seen >= entries) {
      out.tail_seen = out.slot->tail.load(std::memory_order_acquire);
      if (out.head - out.tail_seen >= entries) {  // the receiver is behind: a full NIC queue
        ++stats_.tx_dropped;
        tx_free_.push_back(buffer);
        continue;
      }
    }
    out.ring[out.head & (entries - 1)] = {buffer, b->len, b->entropy, 0, 0};
    ++out.head;
    lent[buffer].store(1, std::memory_order_relaxed);  // published by the head's release
    lent_to_[buffer] = static_cast<uint32_t>(o);
    lent_.push_back(buffer);
    if (!out.touched) {
      out.touched = true;
      touched_.push_back(static_cast<uint32_t>(o));
    }
    ++stats_.tx_packets;
  }
  if (touched_.empty()) return n;
  for (uint32_t t : touched_)
    outboxes_[t].slot->head.store(outboxes_[t].head, std::memory_order_release);
  // Pairs with the fence in prepare_wait: either the receiver sees our head, or we see
  // that it is asleep and ring its doorbell.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (uint32_t t : touched_) {
    Outbox& out = outboxes_[t];
    out.touched = false;
    if (shm::header_of(regions_[out.region].base)->asleep.load(std::memory_order_relaxed) == 0)
      continue;
    const char ring[kDoorbellBytes] = {};
    ::sendto(socket_, ring, kDoorbellBytes, MSG_DONTWAIT,
             reinterpret_cast<const sockaddr*>(&out.doorbell), out.doorbell_len);
    ++stats_.tx_doorbells;
  }
  touched_.clear();
  return n;
}

size_t ShmDatapath::rx_burst(PacketBuf** bufs, size_t n) {
  if (header_->asleep.load(std::memory_order_relaxed) != 0) end_sleep();
  const uint32_t used =
      std::min(header_->slots_used.load(std::memory_order_acquire), layout_.inbox_slots);
  size_t kept = 0;
  for (uint32_t k = 0; k < used && kept < n && !rx_free_.empty(); ++k) {
    const uint32_t i = (rx_next_slot_ + k) % used;
    shm::SlotControl* slot = layout_.slot(base_, i);
    if (slot->state.load(std::memory_order_acquire) != shm::kSlotReady) continue;
    const uint32_t head = slot->head.load(std::memory_order_acquire);
    uint32_t tail = slot->tail.load(std::memory_order_relaxed);  // only we write it
    if (head == tail) continue;
    Inbound& in = inbound_[i];
    if (in.region < 0 || in.generation != slot->generation) {
      const int32_t region = map_peer(slot->sender);
      if (region < 0) continue;  // not (yet) a sound region; its packets wait
      in.region = region;
      in.generation = slot->generation;
    }
    const PeerRegion& r = regions_[static_cast<size_t>(in.region)];
    if (r.base == nullptr) continue;  // its owner died (collect_dead_senders frees the slot)
    std::atomic<uint32_t>* lent = r.layout.lent(r.base);
    const shm::Descriptor* ring = shm::ring_of(slot);
    const uint32_t mask = layout_.ring_entries - 1;
    // A head more than a ring ahead can only be a corrupt sender; read one ring's worth.
    uint32_t available = std::min(head - tail, layout_.ring_entries);
    for (; available > 0 && kept < n && !rx_free_.empty(); --available) {
      const shm::Descriptor d = ring[tail & mask];
      ++tail;
      if (d.buffer >= r.layout.buffer_count || d.len > r.layout.mtu_bytes) {
        ++stats_.rx_malformed;
        continue;
      }
      const uint32_t view = rx_free_.back();
      rx_free_.pop_back();
      PacketBuf& v = rx_views_[view];
      v.data = r.layout.buffer(r.base, d.buffer);
      v.len = d.len;
      v.capacity = d.len;
      v.peer = r.addr;  // the region we mapped, not what the slot claims
      v.entropy = d.entropy;
      v.flags = 0;
      rx_lent_flag_[view] = &lent[d.buffer];
      rx_region_[view] = in.region;
      ++region_views_[static_cast<size_t>(in.region)];
      bufs[kept++] = &v;
    }
    slot->tail.store(tail, std::memory_order_release);
    rx_next_slot_ = i;  // start there next time if it still has packets: fairness by burst
  }
  stats_.rx_packets += kept;
  // Now and then while idle, free the inbox slots of senders that died (a system call
  // per sender, so not on every poll).
  if (kept == 0 && ++idle_polls_ % kIdlePollsPerCollection == 0) collect_dead_senders();
  return kept;
}

bool ShmDatapath::read_peer_memory(const NetAddr& peer, uint64_t key, uint64_t remote_address,
                                   uint8_t* local, size_t length) {
  if (!peer_reads_allowed_ || not_local_.count(peer) != 0) return false;
  const int32_t region = map_peer(peer);
  if (region < 0) {
    ++stats_.peer_reads_refused;
    return false;
  }
  const PeerRegion& r = regions_[static_cast<size_t>(region)];
  // The bounce buffer when this read goes through it (null: straight into `local`, also
  // when the buffer could not be had).
  uint8_t* const bounce =
      copy_is_slow(local, reinterpret_cast<const void*>(remote_address), length) &&
              bounce_short_reads()
          ? bounce_buffer()
          : nullptr;
  size_t done = 0;
  while (done < length) {
    // Straight into `local`, or into the bounce buffer at the source's page offset.
    const size_t piece = bounce ? std::min(length - done, kBouncePiece) : length - done;
    uint8_t* into = bounce ? bounce + (remote_address + done) % kCopyPage : local + done;
    iovec to{into, piece};
    iovec from{reinterpret_cast<void*>(remote_address + done), piece};
    const ssize_t n = ::process_vm_readv(r.pid, &to, 1, &from, 1, 0);
    if (n <= 0) {
      // EPERM/ENOSYS: this kernel or its policy (Yama ptrace_scope) forbids it, for good.
      if (n < 0 && (errno == EPERM || errno == ENOSYS)) peer_reads_allowed_ = false;
      ++stats_.peer_reads_refused;
      return false;
    }
    if (bounce) copy_bytes(local + done, into, static_cast<size_t>(n));
    done += static_cast<size_t>(n);
  }
  if (bounce) ++stats_.peer_reads_bounced;
  // A seqlock's reader: the copy, then the key. Pairs with the fence in
  // withdraw_from_reading: had the copy seen a write the application made after the
  // withdrawal, this load would see the withdrawal.
  std::atomic_thread_fence(std::memory_order_acquire);
  const std::atomic<uint64_t>& offered =
      shm::header_of(r.base)->readable_keys[key % shm::kReadableKeys];
  if (key == 0 || offered.load(std::memory_order_acquire) != key) {
    ++stats_.peer_reads_withdrawn;
    return false;
  }
  ++stats_.peer_reads;
  stats_.peer_read_bytes += length;
  return true;
}

uint8_t* ShmDatapath::bounce_buffer() {
  if (!bounce_) {
    try {
      bounce_ = std::make_unique<WarmHugePages>(kBouncePiece + kCopyPage);
    } catch (const std::bad_alloc&) {
      return nullptr;  // read straight into the destination, slow but correct
    }
  }
  return bounce_->data();
}

bool ShmDatapath::bounce_short_reads() const {
  switch (short_distance_reads_) {
    case ShmConfig::ShortDistanceReads::kDirect:
      return false;
    case ShmConfig::ShortDistanceReads::kBounced:
      return true;
    case ShmConfig::ShortDistanceReads::kMeasured:
      break;
  }
  return bounce_short_distance_reads();
}

void ShmDatapath::offer_for_reading(uint64_t key) {
  header_->readable_keys[key % shm::kReadableKeys].store(key, std::memory_order_release);
}

void ShmDatapath::withdraw_from_reading(uint64_t key) {
  uint64_t expected = key;  // a newer key that took its entry stays
  header_->readable_keys[key % shm::kReadableKeys].compare_exchange_strong(
      expected, 0, std::memory_order_acq_rel);
  // The application's writes to the buffer come after this (it reads the completion
  // first): a reader that sees one of them sees the withdrawal too.
  std::atomic_thread_fence(std::memory_order_release);
}

bool ShmDatapath::packets_waiting() const {
  const uint32_t used =
      std::min(header_->slots_used.load(std::memory_order_acquire), layout_.inbox_slots);
  for (uint32_t i = 0; i < used; ++i) {
    const shm::SlotControl* slot = layout_.slot(base_, i);
    if (slot->state.load(std::memory_order_acquire) == shm::kSlotReady &&
        slot->head.load(std::memory_order_acquire) != slot->tail.load(std::memory_order_relaxed))
      return true;
  }
  return false;
}

bool ShmDatapath::prepare_wait() {
  header_->asleep.store(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with tx_burst's
  if (!packets_waiting()) return true;
  end_sleep();
  return false;
}

void ShmDatapath::end_sleep() {
  header_->asleep.store(0, std::memory_order_relaxed);
  if (!owns_socket_) return;  // a shared socket's owner reads (and drops) the doorbells
  char drain[64];
  while (::recv(socket_, drain, sizeof(drain), MSG_DONTWAIT) > 0) {
  }
}

// May run while another thread progresses the engine (the provider waits outside its
// lock), so it touches only the shared header and the socket; rx_burst ends the sleep.
bool ShmDatapath::wait(Duration timeout) {
  if (!prepare_wait()) return true;
  pollfd p{socket_, POLLIN, 0};
  const auto ms = static_cast<int>((timeout.ps + 999'999'999) / 1'000'000'000);
  ::poll(&p, 1, ms);
  return packets_waiting();
}

}  // namespace spray::dp
