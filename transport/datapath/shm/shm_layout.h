// The layout of a shared-memory endpoint's region: what two processes on one host agree
// on to exchange packets without the kernel.
//
// Every endpoint creates one region, a POSIX shared-memory file named after its address
// (region_name). The region holds
//   - a header (geometry, the owner's pid, the owner's "asleep" flag),
//   - an inbox of `inbox_slots` slots: a sender claims one slot and owns it until it dies;
//     a slot is a single-producer single-consumer ring of packet descriptors,
//   - the owner's own packet buffers (`buffer_count` x `buffer_stride` bytes) and one
//     "lent" flag per buffer.
// A packet moves without being copied: the sender fills one of its own buffers, marks it
// lent and puts {buffer index, length, EV} on its slot in the receiver's inbox; the
// receiver hands the engine a pointer straight into the sender's region and, when the
// engine frees it, clears the lent flag so the sender may reuse the buffer.
//
// Trust: every process that can open the region can corrupt it, exactly as with any
// shared-memory transport (Open MPI's vader, libfabric's shm): the region is created
// mode 0600, so only the same user's processes share packets. Indices and lengths read
// from a peer's region are still checked before use, so a corrupt peer cannot make us
// read or write outside its region.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/datapath/net_addr.h"

namespace spray::dp::shm {

inline constexpr uint64_t kMagic = 0x315f4d4853595250;  // "PRYSHM_1", little-endian
inline constexpr uint32_t kVersion = 2;                 // 2: RegionHeader::readable_keys

// Rendezvous keys a region's owner offers for reading at once (see readable_keys): more
// live rendezvous sends than this share entries, and a reader of one overwritten falls
// back to read requests, which is slower but correct.
inline constexpr uint32_t kReadableKeys = 1024;

static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "atomics in shared memory must be lock-free to work across processes");

// One packet on a ring: a buffer of the sender's region.
struct Descriptor {
  uint32_t buffer;   // index into the sender's buffers
  uint32_t len;      // bytes of UET packet at the buffer
  uint16_t entropy;  // the EV (there is no path to spray over; kept for PDS's feedback)
  uint16_t reserved;
  uint32_t reserved2;
};
static_assert(sizeof(Descriptor) == 16);

enum SlotState : uint32_t { kSlotFree = 0, kSlotClaiming = 1, kSlotReady = 2 };

// The control block of one inbox slot; `ring_entries` Descriptors follow it. The sender
// writes `head` and the descriptors, the receiver writes `tail`; each on its own cache line.
struct SlotControl {
  alignas(64) std::atomic<uint32_t> state;  // SlotState; free -> claiming by the sender's CAS
  uint32_t generation;                      // +1 per claim, written while claiming
  int32_t sender_pid;                       // for the receiver's liveness check
  NetAddr sender;                           // the sender's address: its region's name
  alignas(64) std::atomic<uint32_t> head;   // descriptors published, free-running
  alignas(64) std::atomic<uint32_t> tail;   // descriptors consumed, free-running
};

// Where everything of a region is, in bytes from its start. A peer's layout is copied
// out of its header once, checked, and used from the copy: the peer cannot change what
// we bounds-check against.
struct RegionLayout {
  uint32_t mtu_bytes = 0;
  uint32_t buffer_count = 0;
  uint32_t buffer_stride = 0;  // bytes between buffers, a multiple of 64
  uint32_t inbox_slots = 0;
  uint32_t ring_entries = 0;  // a power of two
  uint64_t slot_stride = 0;   // bytes per slot: SlotControl + ring, a multiple of 64
  uint64_t slots_offset = 0;
  uint64_t lent_offset = 0;  // buffer_count std::atomic<uint32_t>: 1 while a receiver holds it
  uint64_t buffers_offset = 0;
  uint64_t total_bytes = 0;

  static RegionLayout of(uint32_t mtu_bytes, uint32_t buffer_count, uint32_t inbox_slots,
                         uint32_t ring_entries);
  // True when this layout is self-consistent and fits in a file of `file_bytes`.
  bool fits(uint64_t file_bytes) const;

  SlotControl* slot(uint8_t* base, uint32_t i) const {
    return reinterpret_cast<SlotControl*>(base + slots_offset + slot_stride * i);
  }
  std::atomic<uint32_t>* lent(uint8_t* base) const {
    return reinterpret_cast<std::atomic<uint32_t>*>(base + lent_offset);
  }
  uint8_t* buffer(uint8_t* base, uint32_t i) const {
    return base + buffers_offset + uint64_t{buffer_stride} * i;
  }
};

inline Descriptor* ring_of(SlotControl* s) {
  return reinterpret_cast<Descriptor*>(s + 1);
}

struct alignas(64) RegionHeader {
  std::atomic<uint64_t> magic;  // kMagic, stored last: a region is usable once it is set
  uint32_t version;
  int32_t owner_pid;
  NetAddr owner;
  RegionLayout layout;
  // Set by the owner before it blocks on its doorbell socket; a sender that publishes
  // packets and then sees it set sends one doorbell datagram (Dekker: both sides store,
  // fence, then load, so a wake-up is never lost).
  alignas(64) std::atomic<uint32_t> asleep;
  std::atomic<uint32_t> slots_used;  // slots ever claimed: the receiver scans [0, slots_used)
  // The rendezvous keys whose send buffers peers may still copy from (cross-memory
  // reads), each at key % kReadableKeys; 0 where none. The owner stores a key before its
  // send's header leaves and clears it before the send's completion can be read; a
  // reader that still finds its key after copying knows that the owner's application had
  // not taken the buffer back while it copied (a send the owner gave up on, its peer
  // silent too long, would otherwise be copied after the application reused the buffer).
  alignas(64) std::atomic<uint64_t> readable_keys[kReadableKeys];
};

inline RegionHeader* header_of(uint8_t* base) {
  return reinterpret_cast<RegionHeader*>(base);
}

// The shared-memory object name of the endpoint at `addr`: "/spray-shm-<ip hex>-<port>".
std::string region_name(const NetAddr& addr);

}  // namespace spray::dp::shm
