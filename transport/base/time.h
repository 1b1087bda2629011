// Time in the transport core: integer picoseconds, passed in by the caller.
//
// The core never reads a clock (DESIGN.md decision 1). The engine's owner feeds it
// `Time` values: the simulator from its virtual clock, a real datapath from
// steady_clock. Picoseconds in 64 bits cover 106 days, enough for any run.
#pragma once

#include <compare>
#include <cstdint>

namespace spray {

// A span of time in picoseconds. Signed so that differences are natural.
struct Duration {
  int64_t ps = 0;

  static constexpr Duration picoseconds(int64_t v) { return {v}; }
  static constexpr Duration nanoseconds(int64_t v) { return {v * 1'000}; }
  static constexpr Duration microseconds(int64_t v) { return {v * 1'000'000}; }
  static constexpr Duration milliseconds(int64_t v) { return {v * 1'000'000'000}; }
  static constexpr Duration seconds(int64_t v) { return {v * 1'000'000'000'000}; }

  constexpr double as_seconds() const { return static_cast<double>(ps) * 1e-12; }
  constexpr double as_microseconds() const { return static_cast<double>(ps) * 1e-6; }

  constexpr auto operator<=>(const Duration&) const = default;
  constexpr Duration operator+(Duration o) const { return {ps + o.ps}; }
  constexpr Duration operator-(Duration o) const { return {ps - o.ps}; }
  constexpr Duration operator*(int64_t k) const { return {ps * k}; }
  constexpr Duration operator/(int64_t k) const { return {ps / k}; }
  constexpr Duration& operator+=(Duration o) {
    ps += o.ps;
    return *this;
  }
};

// A point in time: picoseconds since an origin the caller chose.
struct Time {
  int64_t ps = 0;

  constexpr auto operator<=>(const Time&) const = default;
  constexpr Time operator+(Duration d) const { return {ps + d.ps}; }
  constexpr Time operator-(Duration d) const { return {ps - d.ps}; }
  constexpr Duration operator-(Time o) const { return {ps - o.ps}; }
  constexpr Time& operator+=(Duration d) {
    ps += d.ps;
    return *this;
  }
};

// Time it takes to serialize `bytes` at `gbps` gigabits per second.
constexpr Duration serialization_time(uint64_t bytes, double gbps) {
  return {static_cast<int64_t>(static_cast<double>(bytes) * 8.0 * 1000.0 / gbps)};
}

}  // namespace spray
