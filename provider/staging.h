// Operations whose buffer comes in several pieces: fi_sendv, fi_recvv, fi_readv,
// fi_writev, the *msg forms and the atomic ioc forms, up to kIovLimit pieces each (what
// libfabric's tcp and shm providers offer).
//
// The transport moves one contiguous buffer per message, so an operation of several
// pieces goes through a staging buffer it holds until it ends: a send, write or atomic
// gathers its pieces into it before it is posted; a receive, read or fetching atomic
// lands in it and is scattered into the pieces when it completes. That is one copy of
// the message on that side, so an operation with one non-empty piece never stages: it
// passes that piece to the transport as a contiguous call would.
//
// Ownership: the endpoint owns its StagingBuffers and lends one buffer to an operation
// (by index, Endpoint::Op::staged) from the call that posts it to its completion. The
// buffers are reused: take() lends the smallest free one large enough, so a stream of
// staged messages allocates and faults in its memory once. Free buffers keep their
// memory up to kIdleBytes in all (a buffer given back beyond that is freed), so a burst
// of large staged messages leaves at most that much behind. Why: freeing every buffer
// past 64 KiB, as this once did, cost a heap allocation and the page faults of fresh
// memory on every such message at both ends; 256 KiB messages in two pieces streamed at
// about a quarter of the rate of contiguous ones over udp (spray-fi-rate --pieces 2,
// 2026-12-06). All of it runs under the domain's mutex, like the rest of the endpoint.
#pragma once

#include <rdma/fabric.h>
#include <sys/uio.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace spray::fi {

inline constexpr size_t kIovLimit = 4;

// The non-empty pieces of one operation's buffer, in order (empty ones are dropped; a
// buffer with no bytes at all is kept as its first entry was given, address and all).
struct Pieces {
  std::array<iovec, kIovLimit> piece{};
  size_t count = 0;
  size_t bytes = 0;  // their total

  // The one contiguous buffer this is, when it is at most one piece (nullptr if none).
  bool contiguous() const { return count <= 1; }
  void* only() const { return count ? piece[0].iov_base : nullptr; }
};

// An application's buffer description as pieces, or nullopt when it is not a valid one:
// more than kIovLimit entries, an entry with bytes but no address, or a total that does
// not fit a size_t. Atomic iocs count elements of `element_bytes` each.
std::optional<Pieces> pieces_of(const iovec* iov, size_t count);
std::optional<Pieces> pieces_of(const fi_ioc* ioc, size_t count, size_t element_bytes);
// One contiguous buffer (the plain calls).
std::optional<Pieces> pieces_of(const void* buf, size_t len);

// Copies the pieces, in order, to `out` (which has room for p.bytes).
void gather(const Pieces& p, uint8_t* out);
// Copies the first `bytes` of `in` (at most p.bytes) into the pieces, in order.
void scatter(const uint8_t* in, size_t bytes, const Pieces& p);

class StagingBuffers {
 public:
  static constexpr uint32_t kNone = ~0u;
  // Bytes the free buffers may hold in all; the memory of one given back beyond it is
  // freed.
  static constexpr size_t kIdleBytes = size_t{16} << 20;

  // A buffer of at least `bytes` (its index), or kNone when memory ran out: the smallest
  // free one large enough, else the largest free one grown, else a new one.
  uint32_t take(size_t bytes);
  uint8_t* data(uint32_t index) { return buffers_[index].memory.get(); }
  // Where the buffer's bytes go when its operation completes: `pieces`, filled from
  // offset `from` of the buffer. Empty for operations that only gather.
  void scatter_on_completion(uint32_t index, const Pieces& pieces, size_t from);
  // Scatters what the operation's completion placed (at most `placed` bytes), if the
  // buffer has pieces to scatter into.
  void complete(uint32_t index, size_t placed);
  void give_back(uint32_t index);

  size_t in_use() const { return buffers_.size() - free_.size(); }
  // Bytes held by the free buffers, at most kIdleBytes.
  size_t idle_bytes() const { return idle_bytes_; }

 private:
  struct Buffer {
    std::unique_ptr<uint8_t[]> memory;  // not zeroed: every byte read was written first
    size_t capacity = 0;
    Pieces scatter_to;
    size_t scatter_from = 0;
  };
  // Moving a Buffer keeps its memory where it is, so data() stays valid while the vector
  // grows.
  std::vector<Buffer> buffers_;
  std::vector<uint32_t> free_;  // indices of buffers not lent, in no order
  size_t idle_bytes_ = 0;       // sum of the free buffers' capacities
};

}  // namespace spray::fi
