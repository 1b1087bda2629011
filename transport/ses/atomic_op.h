// The target's half of UET atomics: applying an AMO opcode to elements of registered
// memory, one element at a time, each as one indivisible read-modify-write.
//
// Why real atomic instructions (std::atomic_ref) and not plain loads and stores: the
// engine applies a peer's atomics on whatever thread drives it, while other endpoints
// of the process (each with its own engine) and the application itself may update the
// same words. Atomicity then holds against all of them, as an RDMA NIC's would against
// the CPU. Operations the hardware has (add, and, or, xor, exchange) use it; the rest
// (min, max, product, the logical and compare-and-swap family, floating point) are
// compare-and-swap loops.
//
// Types: the 8-64 bit integers, float and double. 128-bit, complex, long double, bf16
// and fp16 are refused (AMO_UNSUPPORTED_DT), as are bitwise operations on floating point
// and masked swap of it (AMO_UNSUPPORTED_OP). Integer arithmetic wraps (two's
// complement), as libfabric's software atomics do.
#pragma once

#include <cstddef>
#include <cstdint>

#include "transport/wire/ses_header.h"

namespace spray::ses {

// Bytes of one element of `type`; 0 for a type Spray does not operate on.
size_t amo_element_bytes(wire::AmoDatatype type);

// kOk when `op` applies to `type` as a fetching (FETCH_ATOMIC) or non-fetching (ATOMIC)
// request, else the AMO return code that refuses it. kRead and the compare-and-swap
// family exist only as fetching operations (libfabric has no other form of them).
wire::ReturnCode check_atomic(wire::AmoOpcode op, wire::AmoDatatype type, bool fetching);

// Applies `op` to `count` elements at `target`, which must be aligned to the element
// size. Element i's operand is read from `operands` (any alignment; unused by kRead and
// the compare-and-swap family, whose one element uses `compare` and `swap`: the bits of
// the value, zero-extended). When `old_values` is not null, element i's value before the
// operation is written there. The caller has checked the pair with check_atomic.
void apply_atomic(wire::AmoOpcode op, wire::AmoDatatype type, uint8_t* target,
                  const uint8_t* operands, uint64_t compare, uint64_t swap, uint32_t count,
                  uint8_t* old_values);

}  // namespace spray::ses
