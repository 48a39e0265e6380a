// Nerve C++ API: robot time and the time message (issue 45). nerve::Time (a point on
// nerve::Clock, in <nerve.hpp>) to and from nerve::msgs::Time, the stamp of message
// headers (builtin_interfaces/Time maps to it in generated ROS 2 types):
//
//     msg.header.stamp = nerve::to_msg(node.now());
//     nerve::Time t = nerve::from_msg(msg.header.stamp);
#pragma once

#include <nerve.hpp>
#include <nerve/msgs/time.hpp>

#include <cstdint>

namespace nerve {

/// A robot time as a time message (ns since the epoch).
constexpr msgs::Time to_msg(Time t) noexcept { return msgs::Time{Clock::to_ns(t)}; }

/// A time message as a robot time.
constexpr Time from_msg(const msgs::Time& m) noexcept { return Clock::from_ns(m.nanos); }

/// Seconds and nanoseconds (builtin_interfaces/Time's split: `nanosec` in [0, 1e9),
/// `sec` rounded down, so times before the epoch have a negative `sec`).
struct SecNanosec {
  /// Whole seconds (rounded down).
  std::int32_t sec = 0;
  /// Nanoseconds past `sec`, in [0, 1e9).
  std::uint32_t nanosec = 0;
};

/// `t` split as builtin_interfaces/Time (seconds saturate at the int32 range).
constexpr SecNanosec to_sec_nanosec(Time t) noexcept {
  const std::int64_t ns = Clock::to_ns(t);
  std::int64_t sec = ns / 1000000000;
  std::int64_t rem = ns % 1000000000;
  if (rem < 0) {
    rem += 1000000000;
    sec -= 1;
  }
  if (sec > INT32_MAX) return SecNanosec{INT32_MAX, 999999999u};
  if (sec < INT32_MIN) return SecNanosec{INT32_MIN, 0u};
  return SecNanosec{static_cast<std::int32_t>(sec), static_cast<std::uint32_t>(rem)};
}

/// builtin_interfaces/Time's seconds and nanoseconds as a robot time.
constexpr Time from_sec_nanosec(std::int32_t sec, std::uint32_t nanosec) noexcept {
  return Clock::from_ns(static_cast<std::int64_t>(sec) * 1000000000 + static_cast<std::int64_t>(nanosec));
}

}  // namespace nerve
