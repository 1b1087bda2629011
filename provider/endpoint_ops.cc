// The endpoint's operation slots and the buffers they hold while they run: inject
// copies (the caller may reuse its buffer at once) and staging buffers (an operation of
// several pieces, staging.h). Every operation of every table takes its slot here.
#include "provider/endpoint.h"

namespace spray::fi {

uint32_t Endpoint::take_op(void* context, uint64_t flags, void* buf, bool report) {
  const bool receive = (flags & FI_RECV) != 0;
  size_t& in_use = receive ? rx_ops_in_use : tx_ops_in_use;
  if (in_use >= (receive ? rx_ops_limit : tx_ops_limit) || free_ops.empty()) return kNone;
  ++in_use;
  const uint32_t i = free_ops.back();
  free_ops.pop_back();
  ops[i] = Op{.context = context, .buf = buf, .flags = flags, .report = report, .in_use = true};
  return i;
}

void Endpoint::release_op(uint32_t index) {
  Op& op = ops[index];
  --((op.flags & FI_RECV) ? rx_ops_in_use : tx_ops_in_use);
  if (op.inject != kNone) free_injects.push_back(op.inject);
  if (op.staged != kNone) staging.give_back(op.staged);
  op = Op{};
  free_ops.push_back(index);
}

const void* Endpoint::outgoing(uint32_t slot, const Pieces& p, bool inject, int& error) {
  if (inject) {
    if (free_injects.empty()) {
      error = -FI_EAGAIN;
      return nullptr;
    }
    const uint32_t ib = free_injects.back();
    free_injects.pop_back();
    ops[slot].inject = ib;
    uint8_t* copy = inject_storage.data() + size_t{ib} * inject_size;
    gather(p, copy);
    return copy;
  }
  if (p.contiguous()) return p.only();
  uint8_t* staged = stage(slot, p.bytes, error);
  if (staged) gather(p, staged);
  return staged;
}

void* Endpoint::incoming(uint32_t slot, const Pieces& p, int& error) {
  if (p.contiguous()) return p.only();
  uint8_t* staged = stage(slot, p.bytes, error);
  if (staged) staging.scatter_on_completion(ops[slot].staged, p, 0);
  return staged;
}

uint8_t* Endpoint::stage(uint32_t slot, size_t bytes, int& error) {
  const uint32_t staged = staging.take(bytes);
  if (staged == StagingBuffers::kNone) {
    error = -FI_ENOMEM;
    return nullptr;
  }
  ops[slot].staged = staged;
  return staging.data(staged);
}

}  // namespace spray::fi
