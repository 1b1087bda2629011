#include "provider/staging.h"

#include <algorithm>
#include <limits>
#include <new>

#include "transport/base/copy_bytes.h"

namespace spray::fi {
namespace {

// Adds one entry to `out`: false for an entry with bytes but no address, or a total
// that overflows.
bool add(void* base, size_t len, Pieces& out) {
  if (len == 0) return true;
  if (!base || len > std::numeric_limits<size_t>::max() - out.bytes) return false;
  out.piece[out.count++] = iovec{base, len};
  out.bytes += len;
  return true;
}

}  // namespace

std::optional<Pieces> pieces_of(const iovec* iov, size_t count) {
  Pieces out;
  if (count > kIovLimit || (count && !iov)) return std::nullopt;
  for (size_t i = 0; i < count; ++i) {
    if (!add(iov[i].iov_base, iov[i].iov_len, out)) return std::nullopt;
  }
  if (out.count == 0 && count > 0) out.piece[out.count++] = iov[0];  // empty, as given
  return out;
}

std::optional<Pieces> pieces_of(const fi_ioc* ioc, size_t count, size_t element_bytes) {
  Pieces out;
  if (count > kIovLimit || (count && !ioc) || element_bytes == 0) return std::nullopt;
  for (size_t i = 0; i < count; ++i) {
    if (ioc[i].count > std::numeric_limits<size_t>::max() / element_bytes ||
        !add(ioc[i].addr, ioc[i].count * element_bytes, out)) {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<Pieces> pieces_of(const void* buf, size_t len) {
  Pieces out;
  if (!add(const_cast<void*>(buf), len, out)) return std::nullopt;
  if (out.count == 0) out.piece[out.count++] = iovec{const_cast<void*>(buf), 0};  // as given
  return out;
}

void gather(const Pieces& p, uint8_t* out) {
  for (size_t i = 0; i < p.count; ++i) {
    if (p.piece[i].iov_len == 0) continue;  // the empty buffer kept as given may be null
    copy_bytes(out, p.piece[i].iov_base, p.piece[i].iov_len);
    out += p.piece[i].iov_len;
  }
}

void scatter(const uint8_t* in, size_t bytes, const Pieces& p) {
  for (size_t i = 0; i < p.count && bytes > 0; ++i) {
    const size_t n = std::min(bytes, p.piece[i].iov_len);
    if (n == 0) continue;
    copy_bytes(p.piece[i].iov_base, in, n);
    in += n;
    bytes -= n;
  }
}

uint32_t StagingBuffers::take(size_t bytes) {
  // Whether free buffer a serves `bytes` better than b: one that holds them over one
  // that does not; of two that do, the smaller; of two that do not, the larger (grown
  // below). A scan: there are at most as many buffers as operations ever staged at once.
  const auto better = [&](uint32_t a, uint32_t b) {
    const size_t ca = buffers_[a].capacity, cb = buffers_[b].capacity;
    if ((ca >= bytes) != (cb >= bytes)) return ca >= bytes;
    return ca >= bytes ? ca < cb : ca > cb;
  };
  const auto best = std::min_element(free_.begin(), free_.end(), better);
  uint32_t index = kNone;
  try {
    if (best == free_.end()) {
      buffers_.reserve(buffers_.size() + 1);
      free_.reserve(buffers_.size() + 1);  // give_back never allocates
      buffers_.emplace_back();
      index = static_cast<uint32_t>(buffers_.size() - 1);
    } else {
      index = *best;
      *best = free_.back();
      free_.pop_back();
      idle_bytes_ -= buffers_[index].capacity;
    }
    Buffer& b = buffers_[index];
    if (b.capacity < bytes) {
      b.memory.reset();
      b.capacity = 0;
      b.memory.reset(new uint8_t[std::max<size_t>(bytes, 1)]);
      b.capacity = bytes;
    }
    b.scatter_to = Pieces{};
    b.scatter_from = 0;
    return index;
  } catch (const std::bad_alloc&) {
    if (index != kNone) {  // back to the free list, without memory if its growth failed
      idle_bytes_ += buffers_[index].capacity;
      free_.push_back(index);
    }
    return kNone;
  }
}

void StagingBuffers::scatter_on_completion(uint32_t index, const Pieces& pieces, size_t from) {
  buffers_[index].scatter_to = pieces;
  buffers_[index].scatter_from = from;
}

void StagingBuffers::complete(uint32_t index, size_t placed) {
  const Buffer& b = buffers_[index];
  scatter(b.memory.get() + b.scatter_from, std::min(placed, b.scatter_to.bytes), b.scatter_to);
}

void StagingBuffers::give_back(uint32_t index) {
  Buffer& b = buffers_[index];
  if (idle_bytes_ + b.capacity > kIdleBytes) {
    b.memory.reset();
    b.capacity = 0;
  }
  idle_bytes_ += b.capacity;
  b.scatter_to = Pieces{};
  free_.push_back(index);
}

}  // namespace spray::fi
