// Header layouts (structs of BigEndian fields and bytes, alignment 1) written and read
// in place in a packet's bytes.
//
// Why in place: building a layout on the stack and copying it into the packet (or the
// packet into a stack copy) made the CPU read back, with wide loads, bytes it had just
// written with narrow stores. Such a load cannot be forwarded from the stores and waits
// for them to retire: a stall on every header encoded and decoded (seen in profiles of
// BM_SmallMessagePacketRate, tests/bench/transport_bench.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <type_traits>

namespace spray::wire {

template <class Layout>
concept WireLayout = alignof(Layout) == 1 && std::is_trivially_copyable_v<Layout>;

// Creates a zeroed Layout at out[offset] for the encoder to fill field by field. The
// caller has checked that out holds offset + sizeof(Layout) bytes.
template <WireLayout Layout>
Layout& place(std::span<uint8_t> out, size_t offset = 0) {
  return *::new (out.data() + offset) Layout{};
}

// The Layout at in[offset], read where it lies (its fields are read with memcpy, so any
// bytes will do). The caller has checked that in holds offset + sizeof(Layout) bytes.
template <WireLayout Layout>
const Layout& view(std::span<const uint8_t> in, size_t offset = 0) {
  return *reinterpret_cast<const Layout*>(in.data() + offset);
}

}  // namespace spray::wire
