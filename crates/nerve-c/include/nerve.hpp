// Nerve C++ API: a header-only C++17 layer over the C ABI (nerve.h).
//
//     #include <nerve.hpp>
//     #include <nerve/msgs/cmd_vel.hpp>
//     using nerve::msgs::CmdVel;
//
//     int main() {
//       nerve::Context ctx;                                  // from the NERVE_* environment
//       nerve::Node node(ctx, "driver");
//       nerve::Publisher<CmdVel> pub(node, "/cmd_vel");
//       nerve::Loan<CmdVel> loan = pub.loan();               // written in shared memory
//       loan->linear = 0.5f;
//       pub.send(std::move(loan));                           // zero copy
//
//       nerve::Executor exec(ctx);
//       exec.add(nerve::Subscriber<CmdVel>(node, "/cmd_vel"),
//                [](nerve::SampleRef<CmdVel> s) { std::printf("%f\n", s->linear); });
//       nerve::Timer tick = exec.add_timer("tick", std::chrono::milliseconds(10),
//                                          [&] { pub.publish(CmdVel{}); });
//       exec.spin();                                         // until Ctrl-C or exec.stop()
//     }
//
// What is here: Error, its typed kinds (CallError, NoServer, ServerGone, HandlerFailed,
// TooManyInFlight, Rejected, Malformed, Timeout, TooLarge) and Result (errors); Clock,
// Time and Duration (robot time); span, Qos, Context and Node; Publisher, Loan,
// Subscriber, Sample and SampleRef (topics); Client, Pending, Reply, Server, Request and
// ResponseWriter (services); Parameters; Executor and Timer; ActionClient, Goal,
// ActionServer, ServerGoal and Payload (actions); TensorPool, Tensor and
// TensorDescriptor (tensors).
//
// Rules:
// - Every object is RAII and move-only; a moved-from object holds no handle, and using
//   it throws nerve::Error (never undefined behaviour).
// - Objects are thread-affine: use them on the thread that created their Context (a
//   handle used on another thread fails with NERVE_ERR_WRONG_THREAD, naming the owning
//   thread). Use one Context per thread. Destroying (or moving-assigning over) any
//   object works on any thread and leaks nothing: from another thread the release is
//   queued for the owner, which does it at its next Nerve call or while its Executor
//   spins (at once if the owner has exited: its objects went with it).
// - Throwing calls throw nerve::Error (code() and what(): the status name and the C
//   ABI's message), as the class of its kind where it has one (nerve::NoServer for
//   NERVE_ERR_NO_SERVER, ...: see "Errors and results"). The `try_*` forms are noexcept
//   and return nerve::Result (code(): the same status): use them in
//   real-time loops. Loan/send, take/release, publish and call do not allocate in this
//   layer (a std::string is built only when an error happened).
// - Callbacks are any callable. An exception from a subscriber or timer callback ends
//   the spin and is rethrown by it (the executor stays usable); one from a server
//   callback fails that call, the client getting its message. No exception crosses the
//   C ABI.
// - Timeouts are std::chrono durations: zero checks without waiting, nerve::forever
//   (or any negative duration, where an ABI call accepts "until it comes") waits on.
// - Messages are generated headers (<nerve/msgs/*.hpp>, `nerve types gen-cpp`) or
//   hand-written structs declared with NERVE_MESSAGE (<nerve/message.hpp>; their schema
//   is sealed by the C ABI at creation): a fixed head T, optionally followed by a slice
//   of `message_traits<T>::elem_type` elements.
#pragma once

#include "nerve.h"
#include <nerve/traits.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <ratio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#if __cplusplus >= 202002L && defined(__has_include)
#if __has_include(<span>)
#include <span>
#define NERVE_HPP_STD_SPAN 1
#endif
#endif

// GCC reports -Wmaybe-uninitialized false positives for the handles of objects held in a
// std::optional (std::optional<Sample<T>> moved at -O2); silenced for this header only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace nerve {

// ---------------------------------------------------------------------------------------
// span
// ---------------------------------------------------------------------------------------

#ifdef NERVE_HPP_STD_SPAN
/// A view of contiguous elements: `std::span` in C++20.
template <class T>
using span = std::span<T>;
#else
/// A view of contiguous elements (C++17 stand-in for `std::span<T>`, the same
/// construction from (pointer, size), arrays and containers with data() and size()).
template <class T>
class span {
 public:
  /// std::span's member types.
  using element_type = T;
  using value_type = std::remove_cv_t<T>;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using pointer = T*;
  using reference = T&;
  using iterator = T*;

  /// An empty span.
  constexpr span() noexcept = default;
  /// `count` elements at `data`.
  constexpr span(T* data, std::size_t count) noexcept : data_(data), size_(count) {}
  /// The elements of an array.
  template <std::size_t N>
  constexpr span(T (&a)[N]) noexcept : data_(a), size_(N) {}
  /// A span of `U` seen as a span of `T` (adds const).
  template <class U, class = std::enable_if_t<std::is_convertible_v<U (*)[], T (*)[]>>>
  constexpr span(const span<U>& o) noexcept : data_(o.data()), size_(o.size()) {}
  /// The elements of a contiguous container (std::vector, std::array, ...).
  template <class C,
            class = std::enable_if_t<
                !std::is_same_v<std::remove_cv_t<C>, span> &&
                std::is_convertible_v<decltype(std::declval<C&>().data()), T*> &&
                std::is_convertible_v<decltype(std::declval<C&>().size()), std::size_t>>>
  constexpr span(C& c) noexcept : data_(c.data()), size_(c.size()) {}

  /// The first element's address.
  constexpr T* data() const noexcept { return data_; }
  /// The number of elements.
  constexpr std::size_t size() const noexcept { return size_; }
  /// The size in bytes.
  constexpr std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
  /// Whether there is no element.
  constexpr bool empty() const noexcept { return size_ == 0; }
  /// Element `i` (unchecked).
  constexpr T& operator[](std::size_t i) const noexcept { return data_[i]; }
  /// The first element (unchecked).
  constexpr T& front() const noexcept { return data_[0]; }
  /// The last element (unchecked).
  constexpr T& back() const noexcept { return data_[size_ - 1]; }
  /// Iteration.
  constexpr T* begin() const noexcept { return data_; }
  /// Iteration.
  constexpr T* end() const noexcept { return data_ + size_; }
  /// The first `n` elements.
  constexpr span first(std::size_t n) const noexcept { return span(data_, n); }
  /// The last `n` elements.
  constexpr span last(std::size_t n) const noexcept { return span(data_ + size_ - n, n); }
  /// `n` elements from `offset` (all the rest by default).
  constexpr span subspan(std::size_t offset,
                         std::size_t n = static_cast<std::size_t>(-1)) const noexcept {
    return span(data_ + offset, n == static_cast<std::size_t>(-1) ? size_ - offset : n);
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};
#endif

// ---------------------------------------------------------------------------------------
// Errors and results
// ---------------------------------------------------------------------------------------

/// The name of a status code ("NERVE_ERR_TOPIC").
inline const char* status_name(nerve_status_t code) noexcept {
  return nerve_status_name(static_cast<std::int32_t>(code));
}

/// A failed call: its status code, and what() = "<status name>: <message>".
class Error : public std::runtime_error {
 public:
  /// An error of `code` with `message` (what() gets the status name in front).
  Error(nerve_status_t code, const std::string& message)
      : std::runtime_error(std::string(status_name(code)) + ": " + message), code_(code) {}
  /// The status code.
  nerve_status_t code() const noexcept { return code_; }

 private:
  nerve_status_t code_;
};

// Typed errors (issue 45): one class per kind of failure that callers handle apart,
// thrown for its status code whichever call met it (detail::throw_error is the one
// mapping); every class is a nerve::Error, so `catch (const nerve::Error&)` still takes
// them all, and code() gives the same NERVE_ERR_* a C caller sees.
//
//     nerve::Error
//       CallError              a service call or action request failed on its way
//         NoServer             NERVE_ERR_NO_SERVER
//         ServerGone           NERVE_ERR_SERVER_GONE
//         HandlerFailed        NERVE_ERR_HANDLER_FAILED
//         TooManyInFlight      NERVE_ERR_TOO_MANY_IN_FLIGHT
//         Rejected             NERVE_ERR_REJECTED
//         Malformed            NERVE_ERR_MALFORMED
//       Timeout                NERVE_ERR_TIMEOUT (calls, action results, tf lookups)
//       TooLarge               NERVE_ERR_TOO_LARGE (requests, responses, topic payloads)
//
// Timeout and TooLarge are not CallErrors: tf lookups time out and topic payloads are
// too large too. Catch them beside CallError (or catch nerve::Error and switch on
// code()).

/// A service call or an action request failed on its way (the kinds below, and
/// NERVE_ERR_CALL for a shared-memory or network failure).
class CallError : public Error {
 public:
  using Error::Error;
};
/// No server serves the service or action (NERVE_ERR_NO_SERVER).
class NoServer : public CallError {
 public:
  using CallError::CallError;
};
/// The server went away (died or stopped) before it answered (NERVE_ERR_SERVER_GONE).
class ServerGone : public CallError {
 public:
  using CallError::CallError;
};
/// The server's handler failed; what() carries its message (NERVE_ERR_HANDLER_FAILED).
class HandlerFailed : public CallError {
 public:
  using CallError::CallError;
};
/// More calls in flight than the client's ServiceQos::max_in_flight; nothing was sent
/// (NERVE_ERR_TOO_MANY_IN_FLIGHT).
class TooManyInFlight : public CallError {
 public:
  using CallError::CallError;
};
/// The server rejected the request or the goal, with its reason (NERVE_ERR_REJECTED).
class Rejected : public CallError {
 public:
  using CallError::CallError;
};
/// The response broke its type's layout and was dropped (NERVE_ERR_MALFORMED).
class Malformed : public CallError {
 public:
  using CallError::CallError;
};
/// Nothing came within the time asked: a response, an action result, a transform
/// (NERVE_ERR_TIMEOUT).
class Timeout : public Error {
 public:
  using Error::Error;
};
/// A payload is larger than its service or topic allows; nothing was sent
/// (NERVE_ERR_TOO_LARGE).
class TooLarge : public Error {
 public:
  using Error::Error;
};

namespace detail {

/// Throws the error of `code` with `message`, as its class (the one mapping from status
/// codes to the typed errors above).
[[noreturn]] inline void throw_error(nerve_status_t code, const std::string& message) {
  switch (code) {
    case NERVE_ERR_NO_SERVER: throw NoServer(code, message);
    case NERVE_ERR_SERVER_GONE: throw ServerGone(code, message);
    case NERVE_ERR_HANDLER_FAILED: throw HandlerFailed(code, message);
    case NERVE_ERR_TOO_MANY_IN_FLIGHT: throw TooManyInFlight(code, message);
    case NERVE_ERR_REJECTED: throw Rejected(code, message);
    case NERVE_ERR_MALFORMED: throw Malformed(code, message);
    case NERVE_ERR_CALL: throw CallError(code, message);
    case NERVE_ERR_TIMEOUT: throw Timeout(code, message);
    case NERVE_ERR_TOO_LARGE: throw TooLarge(code, message);
    default: throw Error(code, message);
  }
}

/// The C ABI's message of the last failed call on this thread.
inline std::string last_error() { return std::string(nerve_last_error()); }

/// Throws the error of status `s` with the C ABI's message (call right after the failure).
[[noreturn]] inline void throw_status(nerve_status_t s) { throw_error(s, last_error()); }

/// Whether `s` is an error (not NERVE_OK, not NERVE_NOTHING).
constexpr bool is_error(nerve_status_t s) noexcept { return s != NERVE_OK && s != NERVE_NOTHING; }

/// Throws on an error status; returns whether it was NERVE_OK (false: NERVE_NOTHING).
inline bool check(nerve_status_t s) {
  if (is_error(s)) throw_status(s);
  return s == NERVE_OK;
}

/// The message of an error raised by this layer itself (a used-up object).
[[noreturn]] inline void throw_stale(const char* what, std::string_view type) {
  std::string m(what);
  if (!type.empty()) {
    m += " of ";
    m += type;
  }
  m += " is no longer valid: it was released, sent, taken over or moved from";
  throw Error(NERVE_ERR_STALE_HANDLE, m);
}

}  // namespace detail

template <class T>
class Result;

namespace detail {
/// Builds results (the constructors are private so that no Result is half-made).
struct ResultAccess {
  template <class R>
  static R nothing() noexcept {
    R r;
    r.code_ = NERVE_NOTHING;
    return r;
  }
  /// An error of `s`, with the C ABI's message of the last failure.
  template <class R>
  static R error(nerve_status_t s) noexcept {
    return error<R>(s, nerve_last_error());
  }
  /// An error of `s` with `message`.
  template <class R>
  static R error(nerve_status_t s, std::string_view message) noexcept {
    R r;
    r.code_ = s;
    try {
      r.message_.assign(message.data(), message.size());
    } catch (...) {  // out of memory: keep the code
    }
    return r;
  }
  /// An error of `s` naming a used-up object.
  template <class R>
  static R stale(const char* what, std::string_view type) noexcept {
    try {
      throw_stale(what, type);
    } catch (const Error& e) {
      return error<R>(e.code(), e.what() + std::strlen(status_name(e.code())) + 2);
    } catch (...) {
    }
    return error<R>(NERVE_ERR_STALE_HANDLE, std::string_view());
  }
};
}  // namespace detail

/// The outcome of a noexcept `try_*` call: a value (`ok()`), nothing (`code()` is
/// NERVE_NOTHING: no sample queued, no reply yet) or an error (`code()` and
/// `error_message()`). Like std::expected; the success path never allocates.
///
///     if (auto r = sub.try_take()) use(r->x);
///     else if (r.is_error()) log(r.error_message());
template <class T>
class [[nodiscard]] Result {
 public:
  /// A result holding `value`.
  Result(T&& value) noexcept(std::is_nothrow_move_constructible_v<T>)  // NOLINT: implicit
      : value_(std::move(value)), code_(NERVE_OK) {}

  /// Whether a value is held.
  bool ok() const noexcept { return code_ == NERVE_OK; }
  /// Whether a value is held.
  explicit operator bool() const noexcept { return ok(); }
  /// Whether the call failed (neither a value nor "nothing").
  bool is_error() const noexcept { return detail::is_error(code_); }
  /// Whether there was nothing (NERVE_NOTHING): not an error.
  bool is_nothing() const noexcept { return code_ == NERVE_NOTHING; }
  /// NERVE_OK, NERVE_NOTHING or the error's code.
  nerve_status_t code() const noexcept { return code_; }
  /// The error's message ("" unless is_error()).
  const std::string& error_message() const noexcept { return message_; }

  /// The value; throws nerve::Error (the error, or NERVE_NOTHING) when there is none.
  T& value() & {
    check();
    return *value_;
  }
  /// The value; throws nerve::Error when there is none.
  const T& value() const& {
    check();
    return *value_;
  }
  /// The value, moved out; throws nerve::Error when there is none.
  T&& value() && {
    check();
    return std::move(*value_);
  }
  /// The value (checked as value()).
  T& operator*() & { return value(); }
  /// The value (checked as value()).
  const T& operator*() const& { return value(); }
  /// The value, moved out (checked as value()).
  T&& operator*() && { return std::move(*this).value(); }
  /// The value's members (checked as value()).
  T* operator->() { return &value(); }
  /// The value's members (checked as value()).
  const T* operator->() const { return &value(); }
  /// Throws the error (or NERVE_NOTHING) as a nerve::Error unless a value is held.
  void check() const {
    if (!ok()) detail::throw_error(code_, is_nothing() ? std::string("nothing was there") : message_);
  }

 private:
  friend struct detail::ResultAccess;
  Result() noexcept = default;
  std::optional<T> value_;
  nerve_status_t code_ = NERVE_NOTHING;
  std::string message_;
};

/// The outcome of a noexcept `try_*` call without a value: ok(), or an error.
template <>
class [[nodiscard]] Result<void> {
 public:
  /// A success.
  Result() noexcept = default;
  /// Whether the call succeeded.
  bool ok() const noexcept { return code_ == NERVE_OK; }
  /// Whether the call succeeded.
  explicit operator bool() const noexcept { return ok(); }
  /// Whether the call failed.
  bool is_error() const noexcept { return detail::is_error(code_); }
  /// Whether there was nothing to do (NERVE_NOTHING): not an error.
  bool is_nothing() const noexcept { return code_ == NERVE_NOTHING; }
  /// NERVE_OK or the error's code.
  nerve_status_t code() const noexcept { return code_; }
  /// The error's message ("" unless is_error()).
  const std::string& error_message() const noexcept { return message_; }
  /// Throws the error as a nerve::Error, if any.
  void value() const { check(); }
  /// Throws the error as a nerve::Error, if any.
  void check() const {
    if (is_error()) detail::throw_error(code_, message_);
  }

 private:
  friend struct detail::ResultAccess;
  nerve_status_t code_ = NERVE_OK;
  std::string message_;
};

namespace detail {
/// The result of a call of the C ABI that returns no value.
inline Result<void> void_result(nerve_status_t s) noexcept {
  if (is_error(s)) return ResultAccess::error<Result<void>>(s);
  if (s == NERVE_NOTHING) return ResultAccess::nothing<Result<void>>();
  return Result<void>();
}
}  // namespace detail

// ---------------------------------------------------------------------------------------
// Durations
// ---------------------------------------------------------------------------------------

/// A timeout that never ends (where a call can wait until something comes).
inline constexpr std::chrono::nanoseconds forever = std::chrono::nanoseconds::max();

namespace detail {

/// `d` in nanoseconds, saturated to [INT64_MIN, INT64_MAX].
template <class Rep, class Period>
constexpr std::int64_t saturate_ns(std::chrono::duration<Rep, Period> d) noexcept {
  using ns = std::chrono::nanoseconds;
  constexpr auto max = std::numeric_limits<std::int64_t>::max();
  constexpr auto min = std::numeric_limits<std::int64_t>::min();
  if constexpr (std::is_floating_point_v<Rep> || std::ratio_less_v<Period, std::nano>) {
    const long double n = std::chrono::duration<long double, std::nano>(d).count();
    if (!(n == n)) return 0;  // NaN
    if (n >= static_cast<long double>(max)) return max;
    if (n <= static_cast<long double>(min)) return min;
    return static_cast<std::int64_t>(n);
  } else {
    using D = std::chrono::duration<Rep, Period>;
    constexpr D hi = std::chrono::duration_cast<D>(ns::max());
    constexpr D lo = std::chrono::duration_cast<D>(ns::min());
    if (d >= hi) return max;
    if (d <= lo) return min;
    return std::chrono::duration_cast<ns>(d).count();
  }
}

/// A timeout for calls taking int64 nanoseconds (negative: until it comes):
/// nerve::forever and negative durations wait on.
template <class Rep, class Period>
constexpr std::int64_t timeout_i64(std::chrono::duration<Rep, Period> d) noexcept {
  const std::int64_t n = saturate_ns(d);
  return (n < 0 || n == std::numeric_limits<std::int64_t>::max()) ? -1 : n;
}

/// A timeout for calls taking uint64 nanoseconds: negative is 0, nerve::forever about
/// 292 years.
template <class Rep, class Period>
constexpr std::uint64_t timeout_u64(std::chrono::duration<Rep, Period> d) noexcept {
  const std::int64_t n = saturate_ns(d);
  return n < 0 ? 0 : static_cast<std::uint64_t>(n);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
// Time (issue 45)
// ---------------------------------------------------------------------------------------

/// Robot time as a std::chrono clock: nanoseconds since the Unix epoch on Nerve's one
/// clock, the system clock or the simulation clock (NERVE_SIM_TIME=1: the time published
/// on /clock, 0 before the first message). Sample stamps (publish_time()), timer ticks
/// (Tick::time()) and tf stamps are on it. `Clock::now()` reads the process's clock (the
/// first context's); `Context::now()` and `Node::now()` read their context's.
struct Clock {
  /// Nanoseconds.
  using rep = std::int64_t;
  /// Nanoseconds.
  using period = std::nano;
  /// std::chrono::nanoseconds.
  using duration = std::chrono::nanoseconds;
  /// A robot time.
  using time_point = std::chrono::time_point<Clock, duration>;
  /// Not steady: simulation time stands still, jumps, and runs backwards on a replay.
  static constexpr bool is_steady = false;
  /// The process's robot time now (nerve_time_now_ns).
  static time_point now() noexcept { return time_point(duration(nerve_time_now_ns())); }
  /// The time `ns` nanoseconds after the epoch (a C ABI stamp).
  static constexpr time_point from_ns(std::int64_t ns) noexcept { return time_point(duration(ns)); }
  /// Nanoseconds since the epoch (for the C ABI).
  static constexpr std::int64_t to_ns(time_point t) noexcept { return t.time_since_epoch().count(); }
  /// The same instant on std::chrono::system_clock (meaningful on the system clock).
  static std::chrono::system_clock::time_point to_sys(time_point t) noexcept {
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(t.time_since_epoch()));
  }
  /// A system_clock time as a robot time.
  static time_point from_sys(std::chrono::system_clock::time_point t) noexcept {
    return time_point(std::chrono::duration_cast<duration>(t.time_since_epoch()));
  }
};

/// A robot time (a point on nerve::Clock).
using Time = Clock::time_point;
/// A span of robot time.
using Duration = std::chrono::nanoseconds;

// ---------------------------------------------------------------------------------------
// Message layout
// ---------------------------------------------------------------------------------------

namespace detail {

template <class T, class = void>
struct has_head_size : std::false_type {};
template <class T>
struct has_head_size<T, std::void_t<decltype(message_traits<T>::head_size)>> : std::true_type {};

template <class>
inline constexpr bool dependent_false = false;

/// T, in a non-deduced context (std::type_identity_t of C++20).
template <class T>
struct type_identity {
  using type = T;
};
template <class T>
using type_identity_t = typename type_identity<T>::type;

/// Whether E is a slice element type (not nerve::no_elem).
template <class E>
inline constexpr bool is_elem = !std::is_same_v<E, no_elem>;

/// The layout of message type T on the wire: head bytes, slice offset and element size.
template <class T>
struct layout {
  using traits = message_traits<T>;
  using elem = typename traits::elem_type;
  /// Whether a slice follows the head.
  static constexpr bool has_slice = !std::is_same_v<elem, no_elem>;
  static constexpr std::size_t elem_size = has_slice ? sizeof(std::conditional_t<has_slice, elem, char>) : 0;
  static constexpr std::size_t elem_align = has_slice ? alignof(std::conditional_t<has_slice, elem, char>) : 1;
  /// Bytes of the head (0 for an empty message).
  static constexpr std::size_t head_size = [] {
    if constexpr (has_head_size<T>::value) {
      return static_cast<std::size_t>(traits::head_size);
    } else {
      return std::is_empty_v<T> ? std::size_t{0} : sizeof(T);
    }
  }();
  /// Where the slice begins: the head rounded up to the element's alignment.
  static constexpr std::size_t elems_offset = (head_size + elem_align - 1) / elem_align * elem_align;
  /// The most slice elements a payload can describe.
  static constexpr std::size_t max_elems =
      has_slice ? (std::numeric_limits<std::size_t>::max() - elems_offset) / (elem_size ? elem_size : 1) : 0;
  /// Payload bytes of a sample with `n` elements (false when it does not fit a size_t).
  static constexpr bool bytes(std::size_t n, std::size_t& out) noexcept {
    if (n > max_elems) return false;
    out = has_slice ? elems_offset + n * elem_size : head_size;
    return true;
  }

  static_assert(std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T>,
                "nerve: a message head is a trivially copyable, standard-layout struct");
  static_assert(alignof(T) <= 8, "nerve: samples are 8-byte aligned");
  static_assert(elem_align <= 8, "nerve: samples are 8-byte aligned");
  static_assert(head_size <= sizeof(T), "nerve: message_traits<T>::head_size > sizeof(T)");
};

/// A message type's schema text, sealed (with its layout hash), and that hash.
struct sealed_schema {
  std::string text;
  std::uint64_t hash = 0;
};

/// Seals a schema text through the C ABI (nerve_schema_seal): an unsealed text (hash all
/// zeros, as NERVE_MESSAGE writes it) gets the layout hash the Rust derive computes.
inline sealed_schema seal(const std::string& text) {
  sealed_schema out;
  std::size_t need = 0;
  out.text.assign(text.size() + 1, '\0');
  nerve_status_t s = nerve_schema_seal(text.c_str(), out.text.data(), out.text.size(), &need, &out.hash);
  if (s == NERVE_ERR_BUFFER_TOO_SMALL) {
    out.text.assign(need, '\0');
    s = nerve_schema_seal(text.c_str(), out.text.data(), out.text.size(), &need, &out.hash);
  }
  check(s);
  out.text.resize(need > 0 ? need - 1 : 0);
  return out;
}

/// The sealed schema of message type T: a generated header's own (sealed) text and hash,
/// or a NERVE_MESSAGE type's text sealed once by the C ABI.
template <class T>
const sealed_schema& schema_of() {
  using traits = message_traits<T>;
  if constexpr (traits::sealed) {
    static const sealed_schema s{std::string(traits::schema_text), traits::layout_hash};
    return s;
  } else {
    static const sealed_schema s = seal(std::string(traits::schema_text()));
    return s;
  }
}

/// A service type as the C ABI takes it (owning its strings).
template <class S>
struct service_type {
  using req = typename service_traits<S>::request;
  using resp = typename service_traits<S>::response;
  std::string name;
  nerve_service_type_t c{};
  explicit service_type(std::uint64_t max_payload) : name(service_traits<S>::type_name) {
    const sealed_schema& rq = schema_of<req>();
    const sealed_schema& rs = schema_of<resp>();
    c.type_name = name.c_str();
    c.request_schema = rq.text.c_str();
    c.request_hash = rq.hash;
    c.response_schema = rs.text.c_str();
    c.response_hash = rs.hash;
    c.max_payload = max_payload;
  }
};

/// An owned handle of kind H, destroyed with Destroy.
template <class H, nerve_status_t (*Destroy)(H)>
class Owner {
 public:
  Owner() noexcept = default;
  explicit Owner(H h) noexcept : h_(h) {}
  Owner(Owner&& o) noexcept : h_(std::exchange(o.h_, H{})) {}
  Owner& operator=(Owner&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, H{});
    }
    return *this;
  }
  Owner(const Owner&) = delete;
  Owner& operator=(const Owner&) = delete;
  /// Destroys the handle; any thread may (see reset()).
  ~Owner() { reset(); }
  /// Destroys the handle. On another thread than the owner's, the owner releases it at
  /// its next call or spin; errors (already released) are ignored.
  void reset() noexcept {
    if (h_.id != 0) (void)Destroy(std::exchange(h_, H{}));
  }
  H get() const noexcept { return h_; }
  H release() noexcept { return std::exchange(h_, H{}); }
  bool valid() const noexcept { return h_.id != 0; }

 private:
  H h_{};
};

/// A NUL-terminated copy of `s`.
inline std::string c_string(std::string_view s) { return std::string(s); }

/// Reads a string the C ABI copies out with `f(buf, cap, &needed)` (names, ids, text),
/// growing the buffer once when it is too small.
template <class F>
std::string read_string(F f) {
  char small[64];
  std::size_t need = 0;
  const nerve_status_t s = f(small, sizeof small, &need);
  if (s == NERVE_OK) return std::string(small);
  if (s != NERVE_ERR_BUFFER_TOO_SMALL) throw_status(s);
  std::string out(need, '\0');
  check(f(out.data(), out.size(), &need));
  out.resize(need - 1);
  return out;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
// QoS, context, node
// ---------------------------------------------------------------------------------------

/// A topic's quality of service. The default: depth 4, drop-oldest; presets sensor(),
/// reliable() and latched(); adjust the fields after.
struct Qos {
  /// Samples queued per subscriber (at least 1).
  std::uint32_t depth = 4;
  /// Samples kept for late joiners.
  std::uint32_t history = 0;
  /// Every sample delivered (the Rust `Overflow::BackPressure`): a publisher waits up to
  /// `timeout` for room in a full queue. False: the oldest queued sample is dropped.
  bool back_pressure = false;
  /// How long a back-pressured publisher waits for room.
  std::chrono::nanoseconds timeout = std::chrono::seconds(1);
  /// Largest payload in bytes (0: the default).
  std::uint64_t max_payload = 0;
  /// Samples a subscriber may hold at once (0: the default).
  std::uint32_t max_borrowed = 0;
  /// Samples a publisher may have loaned at once (0: the default).
  std::uint32_t max_loans = 0;

  /// The default QoS (nerve_qos_default).
  Qos() noexcept { from(nerve_qos_default); }
  /// A QoS from the C struct.
  explicit Qos(const nerve_qos_t& q) noexcept { assign(q); }
  /// Sensor streams: newest wins, a slow reader never slows the publisher.
  static Qos sensor() noexcept { return Qos(preset(nerve_qos_sensor)); }
  /// Every sample delivered: the publisher waits up to 1 s for a full queue.
  static Qos reliable() noexcept { return Qos(preset(nerve_qos_reliable)); }
  /// The last sample kept for late joiners.
  static Qos latched() noexcept { return Qos(preset(nerve_qos_latched)); }
  /// The C struct.
  nerve_qos_t to_c() const noexcept {
    nerve_qos_t q{};
    q.depth = depth;
    q.history = history;
    q.reliable = back_pressure;
    q.timeout_ns = detail::timeout_u64(timeout);
    q.max_payload = max_payload;
    q.max_borrowed = max_borrowed;
    q.max_loans = max_loans;
    return q;
  }

 private:
  static nerve_qos_t preset(void (*f)(nerve_qos_t*)) noexcept {
    nerve_qos_t q{};
    f(&q);
    return q;
  }
  void from(void (*f)(nerve_qos_t*)) noexcept { assign(preset(f)); }
  void assign(const nerve_qos_t& q) noexcept {
    depth = q.depth;
    history = q.history;
    back_pressure = q.reliable;
    timeout = std::chrono::nanoseconds(static_cast<std::int64_t>(
        q.timeout_ns > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
            ? std::numeric_limits<std::int64_t>::max()
            : q.timeout_ns));
    max_payload = q.max_payload;
    max_borrowed = q.max_borrowed;
    max_loans = q.max_loans;
  }
};

/// How to open a Context; what is left unset comes from the NERVE_* environment.
struct ContextOptions {
  /// The domain (0 to 999); unset: NERVE_DOMAIN or the configuration's.
  std::optional<std::uint32_t> domain;
  /// A TOML configuration file; empty: NERVE_CONFIG / the environment.
  std::string config_path;
  /// The state directory (records of nodes and topics); empty: the configuration's.
  std::string state_dir;
  /// The network plane on or off; unset: the configuration's choice.
  std::optional<bool> network;
  /// The namespace of the context's nodes ("/" or an absolute name like "/robot1"):
  /// relative names ("chatter") resolve under it, private ones ("~/state") under the
  /// node's full name; empty: NERVE_NAMESPACE, else "/".
  std::string node_namespace;
  /// Remap rules "from:=to" separated by ';' (as NERVE_REMAP), checked before the
  /// environment's; empty: none more.
  std::string remap;

  /// The C options (pointing into this object's strings: valid while it is unchanged).
  nerve_context_options_t to_c() const noexcept {
    nerve_context_options_t o{};
    o.config_path = config_path.empty() ? nullptr : config_path.c_str();
    o.set_domain = domain.has_value();
    o.domain = domain.value_or(0);
    o.state_dir = state_dir.empty() ? nullptr : state_dir.c_str();
    o.network = network ? (*network ? 1 : 0) : -1;
    o.node_namespace = node_namespace.empty() ? nullptr : node_namespace.c_str();
    o.remap = remap.empty() ? nullptr : remap.c_str();
    return o;
  }
};

class MultiThreadedExecutor;

/// A Nerve domain seen from this process. Everything made from it belongs to the thread
/// that created it.
class Context {
 public:
  /// Opens a context from the NERVE_* environment variables.
  Context() {
    nerve_context_t h{};
    detail::check(nerve_context_create(nullptr, &h));
    h_ = Handle(h);
  }
  /// Opens a context with `options`.
  explicit Context(const ContextOptions& options) {
    const nerve_context_options_t o = options.to_c();
    nerve_context_t h{};
    detail::check(nerve_context_create(&o, &h));
    h_ = Handle(h);
  }
  /// The domain id.
  std::uint32_t domain() const {
    std::uint32_t d = 0;
    detail::check(nerve_context_domain(h_.get(), &d));
    return d;
  }
  /// The context's robot time now: the system clock, or simulation time when it runs on
  /// one (NERVE_SIM_TIME=1; 0 until the first /clock message).
  Time now() const {
    std::int64_t ns = 0;
    detail::check(nerve_context_now(h_.get(), &ns));
    return Clock::from_ns(ns);
  }
  /// Whether the context runs on simulation time.
  bool sim_time() const {
    bool sim = false;
    detail::check(nerve_context_sim_time(h_.get(), &sim));
    return sim;
  }
  /// The C handle (still owned by this object).
  nerve_context_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a context (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  friend class MultiThreadedExecutor;
  struct lent_t {};
  /// A context lent by the C ABI for a setup (given back, not destroyed).
  Context(lent_t, nerve_context_t h) noexcept : h_(h) {}
  using Handle = detail::Owner<nerve_context_t, &nerve_context_destroy>;
  Handle h_;
};

template <class T>
class Publisher;
template <class T>
class Subscriber;
template <class S>
class Client;
template <class S>
class Server;
class Parameters;

/// A node of a context: names the publishers, subscribers, services and parameters
/// made from it.
class Node {
 public:
  /// Creates the node `name` (unique among this process's nodes).
  Node(const Context& ctx, std::string_view name) {
    nerve_node_t h{};
    detail::check(nerve_node_create(ctx.handle(), detail::c_string(name).c_str(), &h));
    h_ = Handle(h);
  }
  /// The node's full name (with namespace: "/robot1/talker").
  std::string name() const {
    return detail::read_string(
        [&](char* b, std::size_t c, std::size_t* n) { return nerve_node_name(h_.get(), b, c, n); });
  }
  /// Its context's robot time now (see Context::now()).
  Time now() const {
    std::int64_t ns = 0;
    detail::check(nerve_node_now(h_.get(), &ns));
    return Clock::from_ns(ns);
  }
  /// A publisher of T on `topic` (see Publisher).
  template <class T>
  Publisher<T> publisher(std::string_view topic, const Qos& qos = Qos());
  /// A subscriber of T on `topic` (see Subscriber).
  template <class T>
  Subscriber<T> subscriber(std::string_view topic, const Qos& qos = Qos());
  /// A client of service S named `name` (see Client).
  template <class S>
  Client<S> client(std::string_view name);
  /// The server of service S named `name` (see Server).
  template <class S>
  Server<S> server(std::string_view name);
  /// The node's parameters (see Parameters).
  Parameters parameters();
  /// The C handle (still owned by this object).
  nerve_node_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a node (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  using Handle = detail::Owner<nerve_node_t, &nerve_node_destroy>;
  Handle h_;
};

// ---------------------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------------------

/// A read-only view of a received sample (or request, or reply) of type T: valid while
/// what it views is (during a callback, or while the owning Sample lives). Cheap to copy.
template <class T>
class SampleRef {
  using L = detail::layout<T>;

 public:
  /// The slice element type (nerve::no_elem when there is none).
  using elem_type = typename message_traits<T>::elem_type;

  /// A view of `v`.
  explicit SampleRef(const nerve_sample_view_t& v) noexcept : v_(v) {}
  /// The head.
  const T& operator*() const noexcept { return *get(); }
  /// The head's fields.
  const T* operator->() const noexcept { return get(); }
  /// The head.
  const T* get() const noexcept {
    return std::launder(reinterpret_cast<const T*>(v_.data));
  }
  /// The slice elements that follow the head.
  template <class E = elem_type>
  span<const detail::type_identity_t<E>> elems() const noexcept {
    static_assert(detail::is_elem<E>, "nerve: this message type has no slice (elem_type is no_elem)");
    if (v_.data == nullptr) return span<const E>();
    const auto* p = static_cast<const unsigned char*>(v_.data) + L::elems_offset;
    return span<const E>(std::launder(reinterpret_cast<const E*>(p)), v_.elems);
  }
  /// Sequence number per publisher, from 1.
  std::uint64_t seq() const noexcept { return v_.seq; }
  /// Publish (send) time, monotonic clock, nanoseconds.
  std::uint64_t stamp_ns() const noexcept { return v_.stamp_ns; }
  /// Publish time, wall clock, nanoseconds since the Unix epoch (0 for requests and replies).
  std::int64_t wall_ns() const noexcept { return v_.wall_ns; }
  /// Publish time on the robot clock (wall_ns() as a nerve::Time: simulation time under
  /// simulation time; the epoch for requests and replies).
  Time publish_time() const noexcept { return Clock::from_ns(v_.wall_ns); }
  /// The publisher's id (0 for requests and replies).
  std::uint64_t publisher_id() const noexcept { return v_.publisher_id; }
  /// The payload's size in bytes.
  std::size_t size_bytes() const noexcept { return v_.len; }
  /// The payload (head, then slice elements).
  const void* data() const noexcept { return v_.data; }
  /// The C view.
  const nerve_sample_view_t& view() const noexcept { return v_; }

 private:
  nerve_sample_view_t v_;
};

namespace detail {

/// An owned received payload (a sample, reply or request): its handle and view. Reading
/// a released or moved-from one throws nerve::Error (NERVE_ERR_STALE_HANDLE).
template <class T, class H, nerve_status_t (*Release)(H)>
class OwnedView {
 public:
  /// The slice element type (nerve::no_elem when there is none).
  using elem_type = typename message_traits<T>::elem_type;

  /// Takes the payload over (`o` holds nothing after).
  OwnedView(OwnedView&& o) noexcept : h_(std::exchange(o.h_, H{})), v_(o.v_) {}
  /// Releases the held payload, then takes `o`'s over.
  OwnedView& operator=(OwnedView&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, H{});
      v_ = o.v_;
    }
    return *this;
  }
  OwnedView(const OwnedView&) = delete;
  OwnedView& operator=(const OwnedView&) = delete;
  /// Releases the payload; any thread may (the owner's thread then releases it at its
  /// next call or executor spin).
  ~OwnedView() { reset(); }

  /// The head.
  const T& operator*() const { return *ref().get(); }
  /// The head's fields.
  const T* operator->() const { return ref().get(); }
  /// The head.
  const T* get() const { return ref().get(); }
  /// The slice elements that follow the head.
  template <class E = elem_type>
  span<const type_identity_t<E>> elems() const {
    return ref().template elems<E>();
  }
  /// Sequence number (per publisher, or per client).
  std::uint64_t seq() const { return ref().seq(); }
  /// Publish (send) time, monotonic clock, nanoseconds.
  std::uint64_t stamp_ns() const { return ref().stamp_ns(); }
  /// Publish time, wall clock, nanoseconds since the Unix epoch (0 for requests, replies).
  std::int64_t wall_ns() const { return ref().wall_ns(); }
  /// Publish time on the robot clock (see SampleRef::publish_time()).
  Time publish_time() const { return ref().publish_time(); }
  /// The publisher's id (0 for requests and replies).
  std::uint64_t publisher_id() const { return ref().publisher_id(); }
  /// The payload's size in bytes.
  std::size_t size_bytes() const { return ref().size_bytes(); }
  /// A non-owning view (valid while this object holds the payload).
  SampleRef<T> ref() const {
    if (h_.id == 0) throw_stale(kind(), message_traits<T>::type_name);
    return SampleRef<T>(v_);
  }
  /// Whether this object holds a payload.
  bool valid() const noexcept { return h_.id != 0; }
  /// Whether this object holds a payload.
  explicit operator bool() const noexcept { return valid(); }
  /// Releases the payload now (its memory returns to the sender's pool).
  void reset() noexcept {
    if (h_.id != 0) (void)Release(std::exchange(h_, H{}));
  }
  /// The C handle (still owned by this object).
  H handle() const noexcept { return h_; }
  /// Gives the C handle up (the caller releases it).
  H release() noexcept { return std::exchange(h_, H{}); }

 protected:
  OwnedView() noexcept = default;
  OwnedView(H h, const nerve_sample_view_t& v) noexcept : h_(h), v_(v) {}
  static const char* kind() noexcept {
    if constexpr (std::is_same_v<H, nerve_sample_t>) {
      return "the sample";
    } else if constexpr (std::is_same_v<H, nerve_reply_t>) {
      return "the reply";
    } else {
      return "the request";
    }
  }
  H h_{};
  nerve_sample_view_t v_{};
};

}  // namespace detail

/// A received sample of T, readable until released (destroyed): its memory stays valid
/// even after its Subscriber is gone.
template <class T>
class Sample : public detail::OwnedView<T, nerve_sample_t, &nerve_sample_release> {
  using Base = detail::OwnedView<T, nerve_sample_t, &nerve_sample_release>;

 public:
  /// Takes over a sample handle of the C ABI (with its view).
  Sample(nerve_sample_t h, const nerve_sample_view_t& v) noexcept : Base(h, v) {}
};

/// A received sample of T owned by all its copies (as rclcpp's `shared_ptr<const T>`):
/// no copy of the payload, which stays in shared memory until the last copy is
/// destroyed. Get one from a subscriber callback taking `nerve::SharedSample<T>`
/// (Executor::add) or from a Sample (`SharedSample<T>(std::move(sample))`).
///
/// Bounded: an executor's subscriber holds at most Qos::max_borrowed samples at once
/// (default 2; the one being delivered and the kept ones): a sample that arrives while
/// that many are kept makes spin throw nerve::Error (NERVE_ERR_EXEC, "already holds N
/// samples"), and it stays queued until one is released.
///
/// Release the last copy on the thread that received it (destroying it on another
/// thread relies on the handle table's deferred release to the owning thread).
template <class T>
class SharedSample {
 public:
  /// The slice element type (nerve::no_elem when there is none).
  using elem_type = typename message_traits<T>::elem_type;

  /// An empty shared sample (holds nothing).
  SharedSample() noexcept = default;
  /// Takes over a sample handle of the C ABI (with its view); released at once if the
  /// shared state cannot be allocated (then this throws std::bad_alloc).
  SharedSample(nerve_sample_t h, const nerve_sample_view_t& v) : b_(make(h, v)) {}
  /// Shares an owned sample (it holds nothing after). Throws nerve::Error
  /// (NERVE_ERR_STALE_HANDLE) when `s` holds nothing.
  explicit SharedSample(Sample<T>&& s) {
    const nerve_sample_view_t v = s.ref().view();
    b_ = make(s.release(), v);
  }

  /// The head.
  const T& operator*() const { return *ref().get(); }
  /// The head's fields.
  const T* operator->() const { return ref().get(); }
  /// The head.
  const T* get() const { return ref().get(); }
  /// The slice elements that follow the head.
  template <class E = elem_type>
  span<const detail::type_identity_t<E>> elems() const {
    return ref().template elems<E>();
  }
  /// Sequence number per publisher, from 1.
  std::uint64_t seq() const { return ref().seq(); }
  /// Publish time, monotonic clock, nanoseconds.
  std::uint64_t stamp_ns() const { return ref().stamp_ns(); }
  /// Publish time, wall clock, nanoseconds since the Unix epoch.
  std::int64_t wall_ns() const { return ref().wall_ns(); }
  /// The publisher's id.
  std::uint64_t publisher_id() const { return ref().publisher_id(); }
  /// The payload's size in bytes.
  std::size_t size_bytes() const { return ref().size_bytes(); }
  /// A non-owning view (valid while a copy holds the sample). Throws nerve::Error
  /// (NERVE_ERR_STALE_HANDLE) when this object holds nothing.
  SampleRef<T> ref() const {
    if (!b_) detail::throw_stale("the shared sample", message_traits<T>::type_name);
    return SampleRef<T>(b_->v);
  }
  /// Copies holding this sample (0 when empty).
  long use_count() const noexcept { return b_.use_count(); }
  /// Whether this object holds a sample.
  bool valid() const noexcept { return static_cast<bool>(b_); }
  /// Whether this object holds a sample.
  explicit operator bool() const noexcept { return valid(); }
  /// Lets this copy go (the sample is released with its last copy).
  void reset() noexcept { b_.reset(); }

 private:
  struct Block {
    nerve_sample_t h;
    nerve_sample_view_t v;
    Block(nerve_sample_t handle, const nerve_sample_view_t& view) noexcept : h(handle), v(view) {}
    Block(const Block&) = delete;
    Block& operator=(const Block&) = delete;
    ~Block() { (void)nerve_sample_release(h); }
  };
  static std::shared_ptr<const Block> make(nerve_sample_t h, const nerve_sample_view_t& v) {
    try {
      return std::make_shared<Block>(h, v);
    } catch (...) {
      (void)nerve_sample_release(h);
      throw;
    }
  }
  std::shared_ptr<const Block> b_;
};

// ---------------------------------------------------------------------------------------
// Publishing
// ---------------------------------------------------------------------------------------

namespace detail {

/// What Loan<T> and RequestLoan<S> share: a message of type M loaned from shared memory
/// under the C handle H, written in place, returned unsent by Discard when dropped.
/// `Stale::raise()` throws the error of a use after send (naming what it is).
template <class M, class H, nerve_status_t (*Discard)(H), class Stale>
class LoanedBuffer {
  using L = layout<M>;

 public:
  /// The slice element type (nerve::no_elem when there is none).
  using elem_type = typename message_traits<M>::elem_type;

  /// An empty loan (holds nothing).
  LoanedBuffer() noexcept = default;
  /// Takes the loan over (`o` holds nothing after).
  LoanedBuffer(LoanedBuffer&& o) noexcept
      : h_(std::exchange(o.h_, H{})),
        data_(std::exchange(o.data_, nullptr)),
        n_(std::exchange(o.n_, 0)) {}
  /// Drops the held loan unsent, then takes `o`'s over.
  LoanedBuffer& operator=(LoanedBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, H{});
      data_ = std::exchange(o.data_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  LoanedBuffer(const LoanedBuffer&) = delete;
  LoanedBuffer& operator=(const LoanedBuffer&) = delete;
  /// Drops an unsent loan; any thread may (the owner's thread then does it at its next
  /// call or executor spin).
  ~LoanedBuffer() { reset(); }

  /// The head (zeroed when loaned).
  M& operator*() { return *get(); }
  /// The head's fields.
  M* operator->() { return get(); }
  /// The head.
  M* get() {
    check();
    return std::launder(reinterpret_cast<M*>(data_));
  }
  /// The slice elements (as many as loaned; a request loan's are zeroed, a publisher
  /// loan's are not).
  template <class E = elem_type>
  span<type_identity_t<E>> elems() {
    static_assert(is_elem<E>, "nerve: this message type has no slice (elem_type is no_elem)");
    check();
    auto* p = static_cast<unsigned char*>(data_) + L::elems_offset;
    return span<E>(std::launder(reinterpret_cast<E*>(p)), n_);
  }
  /// The payload's size in bytes.
  std::size_t size_bytes() const noexcept {
    std::size_t b = 0;
    return valid() && L::bytes(n_, b) ? b : 0;
  }
  /// Whether this object holds a loan (false once sent, discarded or moved from).
  bool valid() const noexcept { return h_.id != 0; }
  /// Whether this object holds a loan.
  explicit operator bool() const noexcept { return valid(); }
  /// Drops the loan unsent.
  void discard() noexcept { reset(); }
  /// The C handle (still owned by this object).
  H handle() const noexcept { return h_; }

 protected:
  LoanedBuffer(H h, void* data, std::size_t n) noexcept : h_(h), data_(data), n_(n) {}
  void check() const {
    if (!valid()) Stale::raise();
  }
  /// Gives the handle up (nothing is discarded).
  H take() noexcept {
    data_ = nullptr;
    n_ = 0;
    return std::exchange(h_, H{});
  }
  void reset() noexcept {
    if (h_.id != 0) (void)Discard(take());
  }

  H h_{};
  void* data_ = nullptr;
  std::size_t n_ = 0;
};

/// The stale-use error of a Loan<T>.
template <class T>
struct stale_loan {
  [[noreturn]] static void raise() { throw_stale("the loan", message_traits<T>::type_name); }
};

}  // namespace detail

/// A sample loaned from a Publisher<T>, written in place in shared memory until sent.
/// Dropping it unsent returns it to the pool. Using it after send() (or once moved from)
/// throws nerve::Error (NERVE_ERR_STALE_HANDLE).
template <class T>
class Loan : public detail::LoanedBuffer<T, nerve_loan_t, &nerve_loan_discard, detail::stale_loan<T>> {
  using Base = detail::LoanedBuffer<T, nerve_loan_t, &nerve_loan_discard, detail::stale_loan<T>>;

 public:
  /// An empty loan (holds nothing).
  Loan() noexcept = default;

  /// Sends the sample; the loan is used up (even if the send fails).
  void send() {
    this->check();
    detail::check(nerve_sample_send(this->take()));
  }
  /// Sends the sample without throwing.
  Result<void> try_send() noexcept {
    if (!this->valid()) return detail::ResultAccess::stale<Result<void>>("the loan", message_traits<T>::type_name);
    return detail::void_result(nerve_sample_send(this->take()));
  }
  /// Gives the C handle up (the caller sends or discards it).
  nerve_loan_t release() noexcept { return this->take(); }

 private:
  friend class Publisher<T>;
  Loan(nerve_loan_t h, nerve_publisher_t pub, void* data, std::size_t n) noexcept
      : Base(h, data, n), pub_(pub) {}
  nerve_publisher_t pub_{};
};

/// A publisher of message type T on a topic. The topic's type is checked at creation: a
/// topic of another type fails with nerve::Error naming both types and layouts.
template <class T>
class Publisher {
  using L = detail::layout<T>;

 public:
  /// The slice element type (nerve::no_elem when there is none).
  using elem_type = typename message_traits<T>::elem_type;

  /// An empty publisher (holds nothing).
  Publisher() noexcept = default;
  /// Creates a publisher of T on `topic` with `qos`.
  Publisher(const Node& node, std::string_view topic, const Qos& qos = Qos()) {
    const detail::sealed_schema& schema = detail::schema_of<T>();
    const nerve_qos_t q = qos.to_c();
    nerve_publisher_t h{};
    detail::check(nerve_publisher_create(node.handle(), detail::c_string(topic).c_str(),
                                         schema.text.c_str(), schema.hash, &q, &h));
    h_ = Handle(h);
  }

  /// Loans a sample (the head; a slice type gets no elements) in shared memory.
  Loan<T> loan() { return loan(0); }
  /// Loans a sample with `n_elems` slice elements.
  Loan<T> loan(std::size_t n_elems) {
    Result<Loan<T>> r = try_loan(n_elems);
    if (!r.ok()) detail::throw_error(r.code(), r.error_message());
    return std::move(r).value();
  }
  /// Loans a sample without throwing.
  Result<Loan<T>> try_loan(std::size_t n_elems = 0) noexcept {
    std::size_t bytes = 0;
    if (n_elems > 0 && !L::has_slice)
      return detail::ResultAccess::error<Result<Loan<T>>>(
          NERVE_ERR_INVALID_ARGUMENT, "this message type has no slice: loan() takes no element count");
    if (!L::bytes(n_elems, bytes))
      return detail::ResultAccess::error<Result<Loan<T>>>(NERVE_ERR_INVALID_ARGUMENT,
                                                          "too many slice elements");
    nerve_loan_t h{};
    void* data = nullptr;
    const nerve_status_t s = nerve_publisher_loan(h_.get(), bytes, &h, &data);
    if (s != NERVE_OK) return detail::ResultAccess::error<Result<Loan<T>>>(s);
    return Result<Loan<T>>(Loan<T>(h, h_.get(), data, n_elems));
  }
  /// Sends a loan of this publisher.
  void send(Loan<T>&& loan) {
    mine(loan);
    loan.send();
  }
  /// Sends a loan without throwing.
  Result<void> try_send(Loan<T>&& loan) noexcept {
    if (loan.valid() && loan.pub_.id != h_.get().id)
      return detail::ResultAccess::error<Result<void>>(NERVE_ERR_INVALID_ARGUMENT,
                                                       "the loan comes from another publisher");
    return loan.try_send();
  }
  /// Copies `msg` into a new sample and sends it (a slice type: with no elements).
  void publish(const T& msg) { try_publish(msg).check(); }
  /// Copies `head` and `elems` into a new sample and sends it.
  template <class E = elem_type>
  void publish(const T& head, span<const detail::type_identity_t<E>> elems) {
    try_publish<E>(head, elems).check();
  }
  /// Copies `msg` into a new sample and sends it, without throwing.
  Result<void> try_publish(const T& msg) noexcept {
    if constexpr (L::has_slice) {
      return try_publish<elem_type>(msg, span<const elem_type>());
    } else {
      return detail::void_result(nerve_publisher_publish(h_.get(), &msg, L::head_size));
    }
  }
  /// Copies `head` and `elems` into a new sample and sends it, without throwing.
  template <class E = elem_type>
  Result<void> try_publish(const T& head, span<const detail::type_identity_t<E>> elems) noexcept {
    static_assert(detail::is_elem<E>, "nerve: this message type has no slice (elem_type is no_elem)");
    Result<Loan<T>> r = try_loan(elems.size());
    if (!r.ok()) return detail::ResultAccess::error<Result<void>>(r.code(), r.error_message());
    Loan<T>& l = *r;
    std::memcpy(l.data_, &head, L::head_size);
    if (!elems.empty()) {
      std::memcpy(static_cast<unsigned char*>(l.data_) + L::elems_offset, elems.data(),
                  elems.size() * sizeof(elem_type));
    }
    return l.try_send();
  }
  /// Subscribers connected now.
  std::size_t subscriber_count() const {
    std::size_t n = 0;
    detail::check(nerve_publisher_subscriber_count(h_.get(), &n));
    return n;
  }
  /// Waits up to `timeout` until at least `n` subscribers are connected; whether they are.
  template <class Rep, class Period>
  bool wait_for_subscribers(std::size_t n, std::chrono::duration<Rep, Period> timeout) {
    return detail::check(
        nerve_publisher_wait_for_subscribers(h_.get(), n, detail::timeout_u64(timeout)));
  }
  /// The topic's resolved name: namespace, private name and remap rules applied
  /// ("/robot1/chatter" for "chatter" in /robot1).
  std::string topic_name() const {
    return detail::read_string(
        [&](char* b, std::size_t c, std::size_t* n) { return nerve_publisher_topic_name(h_.get(), b, c, n); });
  }
  /// The C handle (still owned by this object).
  nerve_publisher_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a publisher (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  void mine(const Loan<T>& loan) const {
    if (loan.valid() && loan.pub_.id != h_.get().id)
      throw Error(NERVE_ERR_INVALID_ARGUMENT, "the loan comes from another publisher");
  }
  using Handle = detail::Owner<nerve_publisher_t, &nerve_publisher_destroy>;
  Handle h_;
};

// ---------------------------------------------------------------------------------------
// Subscribing
// ---------------------------------------------------------------------------------------

class Executor;

/// A subscriber of message type T on a topic (type checked as for Publisher).
template <class T>
class Subscriber {
 public:
  /// An empty subscriber (holds nothing).
  Subscriber() noexcept = default;
  /// Creates a subscriber of T on `topic` with `qos`.
  Subscriber(const Node& node, std::string_view topic, const Qos& qos = Qos()) {
    const detail::sealed_schema& schema = detail::schema_of<T>();
    const nerve_qos_t q = qos.to_c();
    nerve_subscriber_t h{};
    detail::check(nerve_subscriber_create(node.handle(), detail::c_string(topic).c_str(),
                                         schema.text.c_str(), schema.hash, &q, &h));
    h_ = Handle(h);
  }
  /// Takes the next queued sample, if any (no wait).
  std::optional<Sample<T>> take() { return take(std::chrono::nanoseconds(0)); }
  /// Takes the next sample, waiting up to `timeout` (nerve::forever: until one comes or a
  /// shutdown is requested).
  template <class Rep, class Period>
  std::optional<Sample<T>> take(std::chrono::duration<Rep, Period> timeout) {
    Result<Sample<T>> r = try_take(timeout);
    if (r.ok()) return std::optional<Sample<T>>(std::move(r).value());
    if (r.is_nothing()) return std::nullopt;
    detail::throw_error(r.code(), r.error_message());
  }
  /// Takes the next queued sample without throwing (NERVE_NOTHING: none queued).
  Result<Sample<T>> try_take() noexcept { return try_take(std::chrono::nanoseconds(0)); }
  /// Takes the next sample, waiting up to `timeout`, without throwing.
  template <class Rep, class Period>
  Result<Sample<T>> try_take(std::chrono::duration<Rep, Period> timeout) noexcept {
    nerve_sample_t h{};
    nerve_sample_view_t v{};
    const nerve_status_t s = nerve_subscriber_take(h_.get(), detail::timeout_i64(timeout), &h, &v);
    if (s == NERVE_OK) return Result<Sample<T>>(Sample<T>(h, v));
    if (s == NERVE_NOTHING) return detail::ResultAccess::nothing<Result<Sample<T>>>();
    return detail::ResultAccess::error<Result<Sample<T>>>(s);
  }
  /// Publishers connected now.
  std::size_t publisher_count() const {
    std::size_t n = 0;
    detail::check(nerve_subscriber_publisher_count(h_.get(), &n));
    return n;
  }
  /// The subscriber's counters (received, lost, malformed).
  nerve_subscriber_stats_t stats() const {
    nerve_subscriber_stats_t st{};
    detail::check(nerve_subscriber_stats(h_.get(), &st));
    return st;
  }
  /// The topic's resolved name: namespace, private name and remap rules applied
  /// ("/robot1/chatter" for "chatter" in /robot1).
  std::string topic_name() const {
    return detail::read_string(
        [&](char* b, std::size_t c, std::size_t* n) { return nerve_subscriber_topic_name(h_.get(), b, c, n); });
  }
  /// The C handle (still owned by this object).
  nerve_subscriber_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a subscriber (false once moved from or added to an
  /// executor).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  friend class Executor;
  using Handle = detail::Owner<nerve_subscriber_t, &nerve_subscriber_destroy>;
  Handle h_;
};

// ---------------------------------------------------------------------------------------
// Services
// ---------------------------------------------------------------------------------------

/// A reply of service S (its response), readable until released (destroyed).
template <class S>
class Reply : public detail::OwnedView<typename service_traits<S>::response, nerve_reply_t,
                                       &nerve_reply_release> {
  using Base = detail::OwnedView<typename service_traits<S>::response, nerve_reply_t,
                                 &nerve_reply_release>;

 public:
  /// Takes over a reply handle of the C ABI (with its view).
  Reply(nerve_reply_t h, const nerve_sample_view_t& v) noexcept : Base(h, v) {}
};

namespace detail {

/// Packs a message head and slice elements into one 8-byte aligned buffer (reused: it
/// allocates only when it grows).
template <class T>
struct packer {
  using L = layout<T>;
  using E = typename message_traits<T>::elem_type;
  std::vector<std::uint64_t> words;

  /// The payload (pointer, bytes) of `head` (and `elems`); no copy for a head alone.
  template <class Elems>
  std::pair<const void*, std::size_t> pack(const T& head, const Elems* elems) {
    if constexpr (!L::has_slice) {
      return {&head, L::head_size};
    } else {
      const std::size_t n = elems ? elems->size() : 0;
      std::size_t bytes = 0;
      if (!L::bytes(n, bytes)) throw Error(NERVE_ERR_INVALID_ARGUMENT, "too many slice elements");
      if (bytes == L::head_size) return {&head, L::head_size};
      const std::size_t need = (bytes + 7) / 8;
      if (words.size() < need) words.resize(need);
      auto* p = reinterpret_cast<unsigned char*>(words.data());
      std::memset(p, 0, L::elems_offset);
      std::memcpy(p, &head, L::head_size);
      if (n > 0) std::memcpy(p + L::elems_offset, elems->data(), n * sizeof(E));
      return {p, bytes};
    }
  }
};

}  // namespace detail

template <class S>
class Pending;

namespace detail {
/// The stale-use error of a RequestLoan<S>.
template <class S>
struct stale_request_loan {
  [[noreturn]] static void raise() { throw_stale("the request loan", service_traits<S>::type_name); }
};
}  // namespace detail


/// A request of service S loaned from a Client<S> (Client::loan), written in place in
/// shared memory and sent without a copy: `client.call(std::move(loan), timeout)` or
/// `client.send(std::move(loan))`. The head is zeroed when loaned. Dropping it unsent
/// sends nothing. Using it after it was sent (or once moved from) throws nerve::Error
/// (NERVE_ERR_STALE_HANDLE).
template <class S>
class RequestLoan
    : public detail::LoanedBuffer<typename service_traits<S>::request, nerve_request_loan_t,
                                  &nerve_client_loan_discard, detail::stale_request_loan<S>> {
  using Base = detail::LoanedBuffer<typename service_traits<S>::request, nerve_request_loan_t,
                                    &nerve_client_loan_discard, detail::stale_request_loan<S>>;

 public:
  /// An empty loan (holds nothing).
  RequestLoan() noexcept = default;

 private:
  friend class Client<S>;
  RequestLoan(nerve_request_loan_t h, nerve_client_t client, void* data, std::size_t n) noexcept
      : Base(h, data, n), client_(client) {}
  nerve_client_t client_{};
};

/// A client of service S: calls with a timeout (call) or in flight (send).
template <class S>
class Client {
 public:
  /// The request type.
  using request = typename service_traits<S>::request;
  /// The response type.
  using response = typename service_traits<S>::response;
  /// The request's slice element type (nerve::no_elem when there is none).
  using request_elem = typename message_traits<request>::elem_type;

  /// An empty client (holds nothing).
  Client() noexcept = default;
  /// Creates a client of the service `name` (`max_payload`: largest request and response
  /// in bytes, 0 for the default).
  Client(const Node& node, std::string_view name, std::uint64_t max_payload = 0) {
    const detail::service_type<S> ty(max_payload);
    nerve_client_t h{};
    detail::check(nerve_client_create(node.handle(), detail::c_string(name).c_str(), &ty.c, &h));
    h_ = Handle(h);
  }
  /// Calls the service and waits up to `timeout` for the reply. Throws the typed error
  /// of the failure: nerve::Timeout, nerve::NoServer, nerve::HandlerFailed (the server's
  /// error), nerve::ServerGone, nerve::TooLarge, nerve::TooManyInFlight, ... (all
  /// nerve::Error).
  template <class Rep, class Period>
  Reply<S> call(const request& req, std::chrono::duration<Rep, Period> timeout) {
    Result<Reply<S>> r = try_call(req, timeout);
    if (!r.ok()) detail::throw_error(r.code(), r.error_message());
    return std::move(r).value();
  }
  /// Calls the service with a request of `head` and slice `elems`.
  template <class Rep, class Period>
  Reply<S> call(const request& head, span<const request_elem> elems,
                std::chrono::duration<Rep, Period> timeout) {
    auto [data, len] = packer_.pack(head, &elems);
    return finish(call_raw(data, len, timeout));
  }
  /// Calls the service without throwing.
  template <class Rep, class Period>
  Result<Reply<S>> try_call(const request& req, std::chrono::duration<Rep, Period> timeout) noexcept {
    try {
      auto [data, len] = packer_.pack(req, static_cast<const span<const request_elem>*>(nullptr));
      return call_raw(data, len, timeout);
    } catch (const std::exception& e) {  // out of memory growing the request buffer
      return detail::ResultAccess::error<Result<Reply<S>>>(NERVE_ERR_CALL, e.what());
    }
  }
  /// Loans a request with room for `elems` slice elements (0 for a request without a
  /// slice), written in place in shared memory: fill it, then call or send it (no copy).
  /// Throws nerve::Error: NERVE_ERR_INVALID_ARGUMENT (elements for a type without a
  /// slice), NERVE_ERR_CALL (too large, too many loans and calls in flight).
  RequestLoan<S> loan(std::size_t elems = 0) {
    using L = detail::layout<request>;
    std::size_t bytes = 0;
    if (!L::bytes(elems, bytes))
      throw Error(NERVE_ERR_INVALID_ARGUMENT, std::to_string(elems) + " slice elements do not fit a request of " +
                                                  std::string(service_traits<S>::type_name));
    nerve_request_loan_t h{};
    void* data = nullptr;
    detail::check(nerve_client_loan(h_.get(), bytes, &h, &data));
    return RequestLoan<S>(h, h_.get(), data, elems);
  }
  /// Sends a loaned request (no copy) and waits up to `timeout` for the reply. The loan
  /// is used up, even when the call fails. Throws nerve::Error as call(); a loan of
  /// another client, or one already sent, is an error and sends nothing.
  template <class Rep, class Period>
  Reply<S> call(RequestLoan<S>&& loan, std::chrono::duration<Rep, Period> timeout) {
    const nerve_request_loan_t l = take_loan(loan);
    nerve_reply_t h{};
    nerve_sample_view_t v{};
    detail::check(nerve_client_call_loan(l, detail::timeout_u64(timeout), &h, &v));
    return Reply<S>(h, v);
  }
  /// Sends a loaned request (no copy); the reply comes through the returned Pending. The
  /// loan is used up, even when the send fails.
  Pending<S> send(RequestLoan<S>&& loan);
  /// Sends a request; the reply comes through the returned Pending.
  Pending<S> send(const request& req);
  /// Sends a request of `head` and slice `elems`.
  Pending<S> send(const request& head, span<const request_elem> elems);
  /// Waits up to `timeout` for a server; whether one is there.
  template <class Rep, class Period>
  bool wait_for_service(std::chrono::duration<Rep, Period> timeout) {
    return detail::check(nerve_client_wait_for_service(h_.get(), detail::timeout_u64(timeout)));
  }
  /// The service's resolved name: namespace, private name and remap rules applied
  /// ("/robot1/chatter" for "chatter" in /robot1).
  std::string service_name() const {
    return detail::read_string(
        [&](char* b, std::size_t c, std::size_t* n) { return nerve_client_service_name(h_.get(), b, c, n); });
  }
  /// The C handle (still owned by this object).
  nerve_client_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a client (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  template <class Rep, class Period>
  Result<Reply<S>> call_raw(const void* data, std::size_t len,
                            std::chrono::duration<Rep, Period> timeout) noexcept {
    nerve_reply_t h{};
    nerve_sample_view_t v{};
    const nerve_status_t s =
        nerve_client_call(h_.get(), data, len, detail::timeout_u64(timeout), &h, &v);
    if (s == NERVE_OK) return Result<Reply<S>>(Reply<S>(h, v));
    if (s == NERVE_NOTHING) return detail::ResultAccess::nothing<Result<Reply<S>>>();
    return detail::ResultAccess::error<Result<Reply<S>>>(s);
  }
  static Reply<S> finish(Result<Reply<S>>&& r) {
    if (!r.ok()) detail::throw_error(r.code(), r.is_nothing() ? std::string("no reply") : r.error_message());
    return std::move(r).value();
  }
  Pending<S> send_raw(const void* data, std::size_t len);
  /// The loan's handle, taken from it, once checked to be this client's.
  nerve_request_loan_t take_loan(RequestLoan<S>& loan) {
    loan.check();
    if (loan.client_.id != h_.get().id)
      throw Error(NERVE_ERR_INVALID_ARGUMENT, "the request loan is of another client (nothing was sent)");
    return loan.take();
  }
  using Handle = detail::Owner<nerve_client_t, &nerve_client_destroy>;
  Handle h_;
  detail::packer<request> packer_;
};

/// A call in flight: wait() for its reply (or error), or try_take() to check. Dropping
/// it forgets the call.
template <class S>
class Pending {
 public:
  /// An empty pending call (holds nothing).
  Pending() noexcept = default;
  /// Takes over a pending-call handle of the C ABI.
  explicit Pending(nerve_pending_t h) noexcept : h_(h) {}
  /// Waits up to `timeout` for the reply: the reply, or nothing while the call is still
  /// in flight. Throws the call's error (NERVE_ERR_CALL, NERVE_ERR_SERVER_GONE); the call
  /// is over once a reply or an error came.
  template <class Rep, class Period>
  std::optional<Reply<S>> wait(std::chrono::duration<Rep, Period> timeout) {
    Result<Reply<S>> r = try_wait(timeout);
    if (r.ok()) return std::optional<Reply<S>>(std::move(r).value());
    if (r.is_nothing()) return std::nullopt;
    detail::throw_error(r.code(), r.error_message());
  }
  /// Waits until the call ends: its reply, or throws its error.
  Reply<S> wait() {
    Result<Reply<S>> r = try_wait(forever);
    if (!r.ok()) detail::throw_error(r.code(), r.is_nothing() ? std::string("no reply") : r.error_message());
    return std::move(r).value();
  }
  /// The reply if it came (NERVE_NOTHING while in flight), without waiting or throwing.
  Result<Reply<S>> try_take() noexcept { return try_wait(std::chrono::nanoseconds(0)); }
  /// Waits up to `timeout` for the reply without throwing.
  template <class Rep, class Period>
  Result<Reply<S>> try_wait(std::chrono::duration<Rep, Period> timeout) noexcept {
    if (!h_.valid()) return detail::ResultAccess::stale<Result<Reply<S>>>("the pending call", service_traits<S>::type_name);
    nerve_reply_t h{};
    nerve_sample_view_t v{};
    const nerve_status_t s = nerve_pending_wait(h_.get(), detail::timeout_i64(timeout), &h, &v);
    if (s == NERVE_NOTHING) return detail::ResultAccess::nothing<Result<Reply<S>>>();
    (void)h_.release();  // the ABI released it: the call is over
    if (s == NERVE_OK) return Result<Reply<S>>(Reply<S>(h, v));
    return detail::ResultAccess::error<Result<Reply<S>>>(s);
  }
  /// Whether the call is still held (false once its reply or error came, or moved from).
  bool valid() const noexcept { return h_.valid(); }
  /// Whether the call is still held.
  explicit operator bool() const noexcept { return valid(); }
  /// The C handle (still owned by this object).
  nerve_pending_t handle() const noexcept { return h_.get(); }

 private:
  using Handle = detail::Owner<nerve_pending_t, &nerve_pending_destroy>;
  Handle h_;
};

template <class S>
Pending<S> Client<S>::send_raw(const void* data, std::size_t len) {
  nerve_pending_t h{};
  detail::check(nerve_client_send(h_.get(), data, len, &h));
  return Pending<S>(h);
}

template <class S>
Pending<S> Client<S>::send(RequestLoan<S>&& loan) {
  const nerve_request_loan_t l = take_loan(loan);
  nerve_pending_t h{};
  detail::check(nerve_client_send_loan(l, &h));
  return Pending<S>(h);
}

template <class S>
Pending<S> Client<S>::send(const request& req) {
  auto [data, len] = packer_.pack(req, static_cast<const span<const request_elem>*>(nullptr));
  return send_raw(data, len);
}

template <class S>
Pending<S> Client<S>::send(const request& head, span<const request_elem> elems) {
  auto [data, len] = packer_.pack(head, &elems);
  return send_raw(data, len);
}

/// A request taken by a Server<S>: read it, then reply() or fail() once. Dropping it
/// unanswered fails the caller's call.
template <class S>
class Request : public detail::OwnedView<typename service_traits<S>::request, nerve_request_t,
                                         &nerve_request_release> {
  using Base = detail::OwnedView<typename service_traits<S>::request, nerve_request_t,
                                 &nerve_request_release>;

 public:
  /// The response type.
  using response = typename service_traits<S>::response;
  /// The response's slice element type (nerve::no_elem when there is none).
  using response_elem = typename message_traits<response>::elem_type;

  /// Takes over a request handle of the C ABI (with its view).
  Request(nerve_request_t h, const nerve_sample_view_t& v) noexcept : Base(h, v) {}
  /// Answers with `resp` (a slice type: with no elements).
  void reply(const response& resp) {
    detail::packer<response> p;
    auto [data, len] = p.pack(resp, static_cast<const span<const response_elem>*>(nullptr));
    answer(data, len);
  }
  /// Answers with `head` and slice `elems` (copied through a temporary buffer).
  void reply(const response& head, span<const response_elem> elems) {
    detail::packer<response> p;
    auto [data, len] = p.pack(head, &elems);
    answer(data, len);
  }
  /// Answers with `resp` without throwing (a slice type: with no elements).
  Result<void> try_reply(const response& resp) noexcept {
    if (!this->valid()) return detail::ResultAccess::stale<Result<void>>("the request", service_traits<S>::type_name);
    try {
      detail::packer<response> p;
      auto [data, len] = p.pack(resp, static_cast<const span<const response_elem>*>(nullptr));
      return detail::void_result(nerve_request_reply(this->release(), data, len));
    } catch (const std::exception& e) {  // out of memory packing the response
      return detail::ResultAccess::error<Result<void>>(NERVE_ERR_SERVE, e.what());
    }
  }
  /// Fails the call: the caller gets an error with `message`.
  void fail(std::string_view message) {
    const std::string m(message);
    if (!this->valid()) detail::throw_stale("the request", service_traits<S>::type_name);
    detail::check(nerve_request_fail(this->release(), m.c_str()));
  }

 private:
  void answer(const void* data, std::size_t len) {
    if (!this->valid()) detail::throw_stale("the request", service_traits<S>::type_name);
    detail::check(nerve_request_reply(this->release(), data, len));
  }
};

/// The server of service S: take() requests and answer them, or hand it to an
/// Executor (Executor::serve).
template <class S>
class Server {
 public:
  /// An empty server (holds nothing).
  Server() noexcept = default;
  /// Creates the server of the service `name` (one per service; `max_payload` as for
  /// Client).
  Server(const Node& node, std::string_view name, std::uint64_t max_payload = 0) {
    const detail::service_type<S> ty(max_payload);
    nerve_server_t h{};
    detail::check(nerve_server_create(node.handle(), detail::c_string(name).c_str(), &ty.c, &h));
    h_ = Handle(h);
  }
  /// Takes the next queued request, if any (no wait).
  std::optional<Request<S>> take() { return take(std::chrono::nanoseconds(0)); }
  /// Takes the next request, waiting up to `timeout` (nerve::forever: until one comes).
  template <class Rep, class Period>
  std::optional<Request<S>> take(std::chrono::duration<Rep, Period> timeout) {
    Result<Request<S>> r = try_take(timeout);
    if (r.ok()) return std::optional<Request<S>>(std::move(r).value());
    if (r.is_nothing()) return std::nullopt;
    detail::throw_error(r.code(), r.error_message());
  }
  /// Takes the next request, waiting up to `timeout`, without throwing.
  template <class Rep, class Period>
  Result<Request<S>> try_take(std::chrono::duration<Rep, Period> timeout) noexcept {
    nerve_request_t h{};
    nerve_sample_view_t v{};
    const nerve_status_t s = nerve_server_take(h_.get(), detail::timeout_i64(timeout), &h, &v);
    if (s == NERVE_OK) return Result<Request<S>>(Request<S>(h, v));
    if (s == NERVE_NOTHING) return detail::ResultAccess::nothing<Result<Request<S>>>();
    return detail::ResultAccess::error<Result<Request<S>>>(s);
  }
  /// The service's resolved name: namespace, private name and remap rules applied
  /// ("/robot1/chatter" for "chatter" in /robot1).
  std::string service_name() const {
    return detail::read_string(
        [&](char* b, std::size_t c, std::size_t* n) { return nerve_server_service_name(h_.get(), b, c, n); });
  }
  /// The C handle (still owned by this object).
  nerve_server_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a server (false once moved from or added to an executor).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  friend class Executor;
  using Handle = detail::Owner<nerve_server_t, &nerve_server_destroy>;
  Handle h_;
};

/// Where an executor's server callback writes a response with a slice: the head, then
/// up to capacity() elements.
template <class T>
class ResponseWriter {
  using L = detail::layout<T>;

 public:
  /// The slice element type.
  using elem_type = typename message_traits<T>::elem_type;

  /// A writer over `capacity` bytes at `buf` (8-byte aligned).
  ResponseWriter(void* buf, std::size_t capacity) noexcept : buf_(buf), cap_(capacity) {
    std::memset(buf_, 0, L::elems_offset);
  }
  /// The head (zeroed).
  T& head() noexcept { return *std::launder(reinterpret_cast<T*>(buf_)); }
  /// The head's fields.
  T* operator->() noexcept { return &head(); }
  /// Room for this many elements.
  std::size_t capacity() const noexcept { return (cap_ - L::elems_offset) / sizeof(elem_type); }
  /// Sets the response's element count to `n` and returns them to fill (throws when
  /// more than capacity()).
  span<elem_type> elems(std::size_t n) {
    if (n > capacity())
      throw Error(NERVE_ERR_BUFFER_TOO_SMALL, "the response holds at most " +
                                                  std::to_string(capacity()) + " elements, not " +
                                                  std::to_string(n));
    n_ = n;
    auto* p = static_cast<unsigned char*>(buf_) + L::elems_offset;
    return span<elem_type>(std::launder(reinterpret_cast<elem_type*>(p)), n);
  }
  /// The response's payload size in bytes.
  std::size_t size_bytes() const noexcept { return L::elems_offset + n_ * sizeof(elem_type); }

 private:
  void* buf_;
  std::size_t cap_;
  std::size_t n_ = 0;
};

// ---------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------

namespace detail {
/// A string as a YAML double-quoted scalar (the text API parses YAML: `123` would be an int).
inline std::string yaml_quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          static const char hex[] = "0123456789abcdef";
          out += "\\x";
          out += hex[u >> 4];
          out += hex[u & 15];
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

template <class T>
inline constexpr bool is_param_int = std::is_integral_v<T> && !std::is_same_v<T, bool>;
template <class T>
inline constexpr bool is_param_string =
    std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view> ||
    std::is_same_v<T, const char*> || std::is_same_v<T, char*>;
}  // namespace detail

/// A node's parameters: declare (with a default and a description), get and set bool,
/// integers (as int64), floating point (as double) and std::string; any type (arrays
/// too) through the text forms (`nerve param` syntax). Remote requests (`nerve param`)
/// are answered by handle_pending() or by an Executor (Executor::add).
class Parameters {
 public:
  /// An empty parameters object (holds nothing).
  Parameters() noexcept = default;
  /// Opens the parameters of `node`.
  explicit Parameters(const Node& node) {
    nerve_params_t h{};
    detail::check(nerve_params_create(node.handle(), &h));
    h_ = Handle(h);
  }
  /// Declares `name` with a default (a value from the parameters file or the environment
  /// wins); returns the value in force.
  template <class T>
  T declare(std::string_view name, const T& default_value, std::string_view description = {}) {
    const std::string n(name);
    const std::string d(description);
    const char* dp = description.empty() ? nullptr : d.c_str();
    if constexpr (std::is_same_v<T, bool>) {
      bool v = false;
      detail::check(nerve_params_declare_bool(h_.get(), n.c_str(), default_value, dp, &v));
      return v;
    } else if constexpr (detail::is_param_int<T>) {
      int64_t v = 0;
      detail::check(nerve_params_declare_int(h_.get(), n.c_str(), to_i64(n, default_value), dp, &v));
      return from_i64<T>(n, v);
    } else if constexpr (std::is_floating_point_v<T>) {
      double v = 0;
      detail::check(nerve_params_declare_double(h_.get(), n.c_str(), static_cast<double>(default_value), dp, &v));
      return static_cast<T>(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      detail::check(nerve_params_declare_text(h_.get(), n.c_str(), detail::yaml_quote(default_value).c_str(), dp));
      return get_text(name);
    } else {
      static_assert(detail::dependent_false<T>,
                    "nerve: parameters are bool, integers, floating point or std::string "
                    "(others: declare_text)");
    }
  }
  /// Declares a string parameter from a C string default.
  std::string declare(std::string_view name, const char* default_value,
                      std::string_view description = {}) {
    return declare<std::string>(name, std::string(default_value), description);
  }
  /// Reads `name` as T (another type is NERVE_ERR_PARAM; a std::string reads any
  /// parameter: a string as its text, others as JSON).
  template <class T>
  T get(std::string_view name) const {
    const std::string n(name);
    if constexpr (std::is_same_v<T, bool>) {
      bool v = false;
      detail::check(nerve_params_get_bool(h_.get(), n.c_str(), &v));
      return v;
    } else if constexpr (detail::is_param_int<T>) {
      int64_t v = 0;
      detail::check(nerve_params_get_int(h_.get(), n.c_str(), &v));
      return from_i64<T>(n, v);
    } else if constexpr (std::is_floating_point_v<T>) {
      double v = 0;
      detail::check(nerve_params_get_double(h_.get(), n.c_str(), &v));
      return static_cast<T>(v);
    } else if constexpr (std::is_same_v<T, std::string>) {
      return get_text(name);
    } else {
      static_assert(detail::dependent_false<T>,
                    "nerve: parameters are bool, integers, floating point or std::string");
    }
  }
  /// Sets `name` (checked as a remote set is: type, range, read-only, validators).
  template <class T>
  void set(std::string_view name, const T& value) {
    const std::string n(name);
    if constexpr (std::is_same_v<T, bool>) {
      detail::check(nerve_params_set_bool(h_.get(), n.c_str(), value));
    } else if constexpr (detail::is_param_int<T>) {
      detail::check(nerve_params_set_int(h_.get(), n.c_str(), to_i64(n, value)));
    } else if constexpr (std::is_floating_point_v<T>) {
      detail::check(nerve_params_set_double(h_.get(), n.c_str(), static_cast<double>(value)));
    } else if constexpr (detail::is_param_string<std::decay_t<T>> || std::is_array_v<T>) {
      detail::check(nerve_params_set_text(h_.get(), n.c_str(),
                                          detail::yaml_quote(std::string_view(value)).c_str()));
    } else {
      static_assert(detail::dependent_false<T>,
                    "nerve: parameters are bool, integers, floating point or std::string "
                    "(others: set_text)");
    }
  }
  /// Declares `name` from text in `nerve param` (YAML) syntax: any type, arrays included.
  void declare_text(std::string_view name, std::string_view default_text,
                    std::string_view description = {}) {
    const std::string n(name), t(default_text), d(description);
    detail::check(nerve_params_declare_text(h_.get(), n.c_str(), t.c_str(),
                                            description.empty() ? nullptr : d.c_str()));
  }
  /// Sets `name` from text in `nerve param` (YAML) syntax.
  void set_text(std::string_view name, std::string_view text) {
    const std::string n(name), t(text);
    detail::check(nerve_params_set_text(h_.get(), n.c_str(), t.c_str()));
  }
  /// Reads any parameter as text: a string as itself, others as JSON.
  std::string get_text(std::string_view name) const {
    const std::string n(name);
    return detail::read_string([&](char* b, std::size_t c, std::size_t* need) {
      return nerve_params_get_text(h_.get(), n.c_str(), b, c, need);
    });
  }
  /// Answers queued remote parameter requests (without an executor); how many.
  std::size_t handle_pending() {
    std::size_t n = 0;
    detail::check(nerve_params_handle_pending(h_.get(), &n));
    return n;
  }
  /// The C handle (still owned by this object).
  nerve_params_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds parameters (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  template <class T>
  static std::int64_t to_i64(const std::string& name, T v) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) >= sizeof(std::int64_t)) {
      if (v > static_cast<T>(std::numeric_limits<std::int64_t>::max()))
        throw Error(NERVE_ERR_PARAM, "parameter " + name + ": " + std::to_string(v) + " does not fit an int64");
    }
    return static_cast<std::int64_t>(v);
  }
  template <class T>
  static T from_i64(const std::string& name, std::int64_t v) {
    if constexpr (!std::is_same_v<T, std::int64_t>) {
      const bool neg_ok = std::is_signed_v<T> || v >= 0;
      const bool fits =
          neg_ok &&
          (std::is_signed_v<T>
               ? (v >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
                  v <= static_cast<std::int64_t>(std::numeric_limits<T>::max()))
               : static_cast<std::uint64_t>(v) <= static_cast<std::uint64_t>(std::numeric_limits<T>::max()));
      if (!fits)
        throw Error(NERVE_ERR_PARAM, "parameter " + name + " is " + std::to_string(v) +
                                         ": out of range of the requested integer type");
    }
    return static_cast<T>(v);
  }
  using Handle = detail::Owner<nerve_params_t, &nerve_params_destroy>;
  Handle h_;
};

// ---------------------------------------------------------------------------------------
// Executor and timers
// ---------------------------------------------------------------------------------------

/// One firing of a timer: the C fields deadline_ns and fired_ns (the timer's clock:
/// monotonic ns, or simulation ns), count (firings so far, this one included), skipped
/// (ticks skipped just before this one) and time_ns (robot time when it fired), with
/// typed accessors.
struct Tick : nerve_tick_t {
  /// Robot time when the firing began (the executor's context's clock).
  Time time() const noexcept { return Clock::from_ns(time_ns); }
  /// How late the firing began after its deadline.
  Duration lateness() const noexcept {
    return Duration(fired_ns >= deadline_ns ? static_cast<std::int64_t>(fired_ns - deadline_ns) : 0);
  }
};

/// A timer of an Executor: cancel(), arm() it again, count its firings. Destroying this
/// object keeps the timer running on its executor (cancel() it to stop it).
class Timer {
 public:
  /// An empty timer (holds nothing).
  Timer() noexcept = default;
  /// Takes over a timer handle of the C ABI.
  explicit Timer(nerve_timer_t h) noexcept : h_(h) {}
  /// Disarms the timer until armed again.
  void cancel() { detail::check(nerve_timer_cancel(h_.get())); }
  /// Arms the timer `after` from now (a periodic timer's grid restarts there).
  template <class Rep, class Period>
  void arm(std::chrono::duration<Rep, Period> after) {
    detail::check(nerve_timer_arm(h_.get(), detail::timeout_u64(after)));
  }
  /// Firings so far.
  std::uint64_t fired() const {
    std::uint64_t f = 0;
    detail::check(nerve_timer_counts(h_.get(), &f, nullptr));
    return f;
  }
  /// Ticks skipped so far because a callback overran.
  std::uint64_t skipped() const {
    std::uint64_t s = 0;
    detail::check(nerve_timer_counts(h_.get(), nullptr, &s));
    return s;
  }
  /// The C handle (still owned by this object).
  nerve_timer_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a timer (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  using Handle = detail::Owner<nerve_timer_t, &nerve_timer_destroy>;
  Handle h_;
};

namespace detail {

/// What an executor's callbacks share: the exception a callback threw, rethrown by spin.
struct ExecState {
  std::exception_ptr error;
};

/// Records the exception being handled (call from a catch block) for the C ABI and, when
/// `state` is given, for spin to rethrow.
inline void record_exception(ExecState* state) noexcept {
  std::exception_ptr e = std::current_exception();
  try {
    if (e) std::rethrow_exception(e);
  } catch (const std::exception& x) {
    nerve_callback_fail(x.what());
  } catch (...) {
    nerve_callback_fail("a C++ exception that is not a std::exception");
  }
  if (state != nullptr && !state->error) state->error = e;
}

template <class F>
void drop_box(void* user) noexcept {
  delete static_cast<F*>(user);
}

template <class T, class F>
struct SubscriberBox {
  F f;
  ExecState* state;
  static std::int32_t call(void* user, const nerve_sample_view_t* v) noexcept {
    auto* self = static_cast<SubscriberBox*>(user);
    try {
      const SampleRef<T> s(*v);
      if constexpr (std::is_invocable_v<F&, const SampleRef<T>&>) {
        self->f(s);
      } else if constexpr (std::is_invocable_v<F&, const T&>) {
        self->f(*s);
      } else {
        static_assert(dependent_false<F>,
                      "nerve: a subscriber callback takes nerve::SampleRef<T>, const T& or "
                      "nerve::SharedSample<T>");
      }
      return 0;
    } catch (...) {
      record_exception(self->state);
      return 1;
    }
  }
};

/// A subscriber callback taking nerve::SharedSample<T>: it owns each sample.
template <class T, class F>
struct SharedSubscriberBox {
  F f;
  ExecState* state;
  static std::int32_t call(void* user, nerve_sample_t h, const nerve_sample_view_t* v) noexcept {
    auto* self = static_cast<SharedSubscriberBox*>(user);
    try {
      SharedSample<T> s(h, *v);  // owns the handle from here (released if this throws)
      self->f(std::move(s));
      return 0;
    } catch (...) {
      record_exception(self->state);
      return 1;
    }
  }
};

/// Whether a subscriber callback of T takes nerve::SharedSample<T> (and not a view).
template <class T, class F>
constexpr bool takes_shared = !std::is_invocable_v<F&, const SampleRef<T>&> &&
                              !std::is_invocable_v<F&, const T&> &&
                              std::is_invocable_v<F&, SharedSample<T>>;

template <class F>
struct TimerBox {
  F f;
  ExecState* state;
  static std::int32_t call(void* user, const nerve_tick_t* t) noexcept {
    auto* self = static_cast<TimerBox*>(user);
    try {
      if constexpr (std::is_invocable_v<F&, const Tick&>) {
        const Tick tick{*t};
        self->f(tick);
      } else if constexpr (std::is_invocable_v<F&>) {
        self->f();
      } else {
        static_assert(dependent_false<F>, "nerve: a timer callback takes const nerve::Tick& or nothing");
      }
      return 0;
    } catch (...) {
      record_exception(self->state);
      return 1;
    }
  }
};

template <class S, class F>
struct ServerBox {
  using Req = typename service_traits<S>::request;
  using Resp = typename service_traits<S>::response;
  F f;
  static std::int32_t call(void* user, const nerve_sample_view_t* req, void* resp,
                           std::size_t capacity, std::size_t* len) noexcept {
    auto* self = static_cast<ServerBox*>(user);
    try {
      const SampleRef<Req> r(*req);
      if constexpr (std::is_invocable_v<F&, const SampleRef<Req>&, ResponseWriter<Resp>&>) {
        ResponseWriter<Resp> w(resp, capacity);
        self->f(r, w);
        *len = w.size_bytes();
      } else {
        Resp out = [&] {
          if constexpr (std::is_invocable_r_v<Resp, F&, const SampleRef<Req>&>) {
            return self->f(r);
          } else if constexpr (std::is_invocable_r_v<Resp, F&, const Req&>) {
            return self->f(*r);
          } else {
            static_assert(dependent_false<F>,
                          "nerve: a server callback is Response(const Request&), "
                          "Response(nerve::SampleRef<Request>) or "
                          "void(nerve::SampleRef<Request>, nerve::ResponseWriter<Response>&)");
            return Resp{};
          }
        }();
        constexpr std::size_t off = layout<Resp>::elems_offset;
        std::memset(resp, 0, off);
        std::memcpy(resp, &out, layout<Resp>::head_size);
        *len = off;
      }
      (void)capacity;
      return 0;
    } catch (...) {
      record_exception(nullptr);  // the caller's call fails with the message
      return 1;
    }
  }
};

}  // namespace detail

/// Runs the callbacks of subscribers, servers and timers from one wait. Callbacks run on
/// the thread that spins; an exception from a subscriber or timer callback ends the spin
/// and is rethrown by it (the executor stays usable); a server callback's exception
/// fails the caller's call with its message instead. stop() is sticky: a stopped
/// executor's spins return at once.
class Executor {
 public:
  /// An empty executor (holds nothing).
  Executor() noexcept = default;
  /// Creates an executor for objects of `ctx` (SIGINT and SIGTERM stop spin()).
  explicit Executor(const Context& ctx) : state_(std::make_shared<detail::ExecState>()) {
    nerve_executor_t h{};
    detail::check(nerve_executor_create(ctx.handle(), &h));
    h_ = Handle(h);
  }
  /// Takes the executor over (the callbacks stay with it).
  Executor(Executor&&) noexcept = default;
  /// Destroys the held executor (its callbacks are dropped), then takes over `o`'s.
  Executor& operator=(Executor&& o) noexcept {
    if (this != &o) {
      h_ = std::move(o.h_);
      state_ = std::move(o.state_);
    }
    return *this;
  }
  /// Destroys the executor and its callbacks.
  ~Executor() { h_.reset(); }

  /// Moves `sub` into the executor: `f` runs with each sample, as `f(SampleRef<T>)` or
  /// `f(const T&)` (a view valid during the call), or `f(SharedSample<T>)` (the callback
  /// may keep the sample past the call, without a copy; see SharedSample).
  template <class T, class F>
  void add(Subscriber<T>&& sub, F&& f) {
    if constexpr (detail::takes_shared<T, std::decay_t<F>>) {
      using Box = detail::SharedSubscriberBox<T, std::decay_t<F>>;
      auto* box = new Box{std::forward<F>(f), state_.get()};
      // the ABI owns `box` from here: it calls drop_box, even when the call fails
      detail::check(nerve_executor_add_subscriber_shared(h_.get(), sub.h_.get(), &Box::call, box,
                                                         &detail::drop_box<Box>));
    } else {
      using Box = detail::SubscriberBox<T, std::decay_t<F>>;
      auto* box = new Box{std::forward<F>(f), state_.get()};
      // the ABI owns `box` from here: it calls drop_box, even when the call fails
      detail::check(nerve_executor_add_subscriber(h_.get(), sub.h_.get(), &Box::call, box,
                                                  &detail::drop_box<Box>));
    }
    (void)sub.h_.release();
  }
  /// Moves `server` into the executor: `f` answers each request, as
  /// `Response f(const Request&)` or `Response f(SampleRef<Request>)` (a slice response:
  /// with no elements); its exception fails that call with its message.
  template <class S, class F>
  void serve(Server<S>&& server, F&& f) {
    serve_with(std::move(server), detail::layout<typename service_traits<S>::response>::elems_offset,
               std::forward<F>(f));
  }
  /// Moves `server` into the executor: `f(SampleRef<Request>, ResponseWriter<Response>&)`
  /// writes each response, with up to `max_elems` slice elements.
  template <class S, class F>
  void serve(Server<S>&& server, std::size_t max_elems, F&& f) {
    using Resp = typename service_traits<S>::response;
    std::size_t cap = 0;
    if (!detail::layout<Resp>::bytes(max_elems, cap))
      throw Error(NERVE_ERR_INVALID_ARGUMENT, "max_elems is too large");
    serve_with(std::move(server), cap, std::forward<F>(f));
  }
  /// Adds a periodic timer: `f` (taking `const Tick&` or nothing) every `period` on an
  /// absolute grid starting one period from now.
  template <class Rep, class Period, class F>
  Timer add_timer(std::string_view name, std::chrono::duration<Rep, Period> period, F&& f) {
    return timer(name, detail::timeout_u64(period), std::forward<F>(f), false);
  }
  /// Adds a one-shot timer firing `after` from now (zero: disarmed until Timer::arm).
  template <class Rep, class Period, class F>
  Timer add_one_shot(std::string_view name, std::chrono::duration<Rep, Period> after, F&& f) {
    return timer(name, detail::timeout_u64(after), std::forward<F>(f), true);
  }
  /// Answers the node's remote parameter requests on this executor (`params` stays
  /// usable).
  void add(Parameters& params) { detail::check(nerve_executor_add_params(h_.get(), params.handle())); }
  /// Waits up to `timeout` for work and runs what is ready; the callbacks run.
  template <class Rep, class Period>
  std::size_t spin_once(std::chrono::duration<Rep, Period> timeout) {
    std::size_t ran = 0;
    finish(nerve_executor_spin_once(h_.get(), detail::timeout_u64(timeout), &ran));
    return ran;
  }
  /// Runs callbacks for `duration` (or until stopped).
  template <class Rep, class Period>
  void spin_for(std::chrono::duration<Rep, Period> duration) {
    finish(nerve_executor_spin_for(h_.get(), detail::timeout_u64(duration)));
  }
  /// Runs callbacks until stop(), nerve::shutdown_request() or SIGINT / SIGTERM, then
  /// drains queued input and returns.
  void spin() { finish(nerve_executor_spin(h_.get())); }
  /// Stops a spinning executor (from one of its callbacks or between spins); sticky.
  void stop() { detail::check(nerve_executor_stop(h_.get())); }
  /// The C handle (still owned by this object).
  nerve_executor_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds an executor (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  template <class S, class F>
  void serve_with(Server<S>&& server, std::size_t capacity, F&& f) {
    using Box = detail::ServerBox<S, std::decay_t<F>>;
    auto* box = new Box{std::forward<F>(f)};
    detail::check(nerve_executor_add_server(h_.get(), server.h_.get(), capacity, &Box::call, box,
                                            &detail::drop_box<Box>));
    (void)server.h_.release();
  }
  template <class F>
  Timer timer(std::string_view name, std::uint64_t ns, F&& f, bool one_shot) {
    using Box = detail::TimerBox<std::decay_t<F>>;
    const std::string n(name);
    auto* box = new Box{std::forward<F>(f), state_.get()};
    nerve_timer_t t{};
    const nerve_status_t s =
        one_shot ? nerve_executor_add_one_shot(h_.get(), n.c_str(), ns, &Box::call, box,
                                               &detail::drop_box<Box>, &t)
                 : nerve_executor_add_timer(h_.get(), n.c_str(), ns, &Box::call, box,
                                            &detail::drop_box<Box>, &t);
    detail::check(s);
    return Timer(t);
  }
  void finish(nerve_status_t s) {
    if (state_ && state_->error) std::rethrow_exception(std::exchange(state_->error, nullptr));
    detail::check(s);
  }
  friend class MultiThreadedExecutor;
  using Handle = detail::Owner<nerve_executor_t, &nerve_executor_destroy>;
  Handle h_;  // destroyed (callbacks dropped) before state_
  // shared with a MultiThreadedExecutor that lent this executor to a setup
  std::shared_ptr<detail::ExecState> state_;
};

// ---------------------------------------------------------------------------------------
// Multi-threaded executor (callback groups)
// ---------------------------------------------------------------------------------------

/// How callbacks of a group of a MultiThreadedExecutor may overlap (Rust's
/// `nerve::CallbackGroup`).
enum class CallbackGroup {
  /// Never two callbacks of the group at once: the whole group runs on one worker.
  MutuallyExclusive = NERVE_GROUP_MUTUALLY_EXCLUSIVE,
  /// Callbacks of the group may run in parallel: each setup added to the group goes to
  /// the next worker in turn (one subscriber's own callbacks still run one at a time, in
  /// order).
  Reentrant = NERVE_GROUP_REENTRANT,
};

/// A group of a MultiThreadedExecutor (MultiThreadedExecutor::group).
class GroupId {
 public:
  /// No group.
  GroupId() noexcept = default;
  /// The C group.
  nerve_callback_group_t handle() const noexcept { return g_; }

 private:
  friend class MultiThreadedExecutor;
  explicit GroupId(nerve_callback_group_t g) noexcept : g_(g) {}
  nerve_callback_group_t g_{};
};

/// Several worker threads, each with its own Executor; callback groups choose the
/// worker (as rclcpp's MultiThreadedExecutor with MutuallyExclusive and Reentrant
/// groups). Nerve objects stay on the thread that made their context, so entities are
/// not moved to a worker: add() a setup, which runs on the worker when spin() starts,
/// with a Context opened there (from the options given here) and that worker's
/// Executor. The setup creates nodes, subscribers, servers and timers with them; what it
/// adds to the Executor (and what its callbacks capture) lives until the worker's spin
/// ends and is destroyed on the worker. The Context& and Executor& are valid during the
/// setup only: keep the objects made from them, not them.
///
/// An exception thrown by a setup, or by a subscriber or timer callback, stops every
/// worker and is rethrown by spin() (the first one, in the order setups were added).
/// stop() may be called from any thread, a callback's included; it is sticky (not
/// async-signal-safe: from a signal handler use nerve::shutdown_request()). The other
/// members are called from one thread at a time, and group()/add() not during spin()
/// (NERVE_ERR_BUSY). The lent Executor's stop() stops that worker only.
class MultiThreadedExecutor {
 public:
  /// An executor of `threads` workers (at least one) whose setups open their contexts
  /// with `options` (the NERVE_* environment fills what is unset). SIGINT and SIGTERM
  /// stop spin().
  explicit MultiThreadedExecutor(std::size_t threads, const ContextOptions& options = ContextOptions()) {
    const nerve_context_options_t o = options.to_c();
    nerve_mt_executor_t h{};
    detail::check(nerve_mt_executor_create(threads, &o, &h));
    h_ = Handle(h);
  }
  /// Takes the executor over.
  MultiThreadedExecutor(MultiThreadedExecutor&&) noexcept = default;
  /// Destroys the held executor, then takes over `o`'s.
  MultiThreadedExecutor& operator=(MultiThreadedExecutor&& o) noexcept {
    if (this != &o) {
      h_ = std::move(o.h_);
      states_ = std::move(o.states_);
    }
    return *this;
  }
  /// Destroys the executor (setups that never ran are dropped).
  ~MultiThreadedExecutor() { h_.reset(); }

  /// A new callback group.
  GroupId group(CallbackGroup kind) {
    nerve_callback_group_t g{};
    detail::check(nerve_mt_executor_group(h_.get(), static_cast<std::int32_t>(kind), &g));
    return GroupId(g);
  }
  /// Adds a setup to `group`: `setup(nerve::Context&, nerve::Executor&)` (or
  /// `setup(nerve::Executor&)`) runs on the worker thread the group chooses when spin()
  /// starts. `setup` is moved to that thread (it must be safe to run and destroy there).
  template <class F>
  void add(GroupId group, F&& setup) {
    using Box = SetupBox<std::decay_t<F>>;
    auto state = std::make_shared<detail::ExecState>();
    states_.reserve(states_.size() + 1);  // no throw after the ABI took the box
    auto* box = new Box{std::forward<F>(setup), state};
    // the ABI owns `box` from here: it calls drop_box, even when the call fails
    detail::check(nerve_mt_executor_add(h_.get(), group.handle(), &Box::call, box, &detail::drop_box<Box>));
    states_.push_back(std::move(state));
  }
  /// Whether spin() installs SIGINT/SIGTERM handlers and stops on them (default true).
  void handle_signals(bool on) { detail::check(nerve_mt_executor_handle_signals(h_.get(), on)); }
  /// Runs every worker until stop(), nerve::shutdown_request() or SIGINT / SIGTERM, each
  /// draining queued input within `drain`; returns once all have ended. Rethrows the
  /// first exception of a setup or callback, else throws nerve::Error on a failure.
  template <class Rep, class Period>
  void spin(std::chrono::duration<Rep, Period> drain) {
    const nerve_status_t s = nerve_mt_executor_spin(h_.get(), detail::timeout_u64(drain));
    // spinning on another thread: its workers' callbacks still use the states
    if (s == NERVE_ERR_BUSY) detail::check(s);
    // the workers have ended (joined) and their callbacks are gone: the states are read
    // here only, and dropped
    std::exception_ptr first;
    for (auto& st : states_) {
      if (!first && st->error) first = st->error;
    }
    states_.clear();
    if (first) std::rethrow_exception(first);
    detail::check(s);
  }
  /// spin() draining within half a second (the Rust executor's default).
  void spin() { spin(std::chrono::milliseconds(500)); }
  /// Stops every worker (any thread; sticky: later spins return at once).
  void stop() { detail::check(nerve_mt_executor_stop(h_.get())); }
  /// The C handle (still owned by this object; usable from any thread).
  nerve_mt_executor_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds an executor (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  template <class F>
  struct SetupBox {
    F f;
    std::shared_ptr<detail::ExecState> state;
    static std::int32_t call(void* user, nerve_context_t ctx, nerve_executor_t exec) noexcept {
      auto* self = static_cast<SetupBox*>(user);
      try {
        // the context and executor are the ABI's, lent for the call: given back after
        struct Lent {
          Context c;
          Executor e;
          Lent(nerve_context_t ch, nerve_executor_t eh, std::shared_ptr<detail::ExecState> st) noexcept
              : c(Context::lent_t{}, ch) {
            e.h_ = Executor::Handle(eh);
            e.state_ = std::move(st);
          }
          Lent(const Lent&) = delete;
          Lent& operator=(const Lent&) = delete;
          ~Lent() {
            (void)c.h_.release();
            (void)e.h_.release();
          }
        } lent(ctx, exec, self->state);
        if constexpr (std::is_invocable_v<F&, Context&, Executor&>) {
          self->f(lent.c, lent.e);
        } else if constexpr (std::is_invocable_v<F&, Executor&>) {
          self->f(lent.e);
        } else {
          static_assert(detail::dependent_false<F>,
                        "nerve: a setup is void(nerve::Context&, nerve::Executor&) or void(nerve::Executor&)");
        }
        return 0;
      } catch (...) {
        detail::record_exception(self->state.get());
        return 1;
      }
    }
  };
  using Handle = detail::Owner<nerve_mt_executor_t, &nerve_mt_executor_destroy>;
  Handle h_;
  // one per setup: what its callbacks threw (written on its worker, read after spin)
  std::vector<std::shared_ptr<detail::ExecState>> states_;
};

// ---------------------------------------------------------------------------------------
// Copied payloads (actions)
// ---------------------------------------------------------------------------------------

/// A message of type T copied out of the library (an action's goal, feedback or result):
/// owns its bytes (8-byte aligned), read like a Sample.
template <class T>
class Payload {
  using L = detail::layout<T>;

 public:
  /// The slice element type (nerve::no_elem when there is none).
  using elem_type = typename message_traits<T>::elem_type;

  /// A copy of `len` payload bytes at `data` (head, then slice elements). Throws
  /// nerve::Error (NERVE_ERR_TYPE_MISMATCH) when they cannot be a T.
  Payload(const void* data, std::size_t len) : words_((len + 7) / 8 + 1, 0), len_(len) {
    const bool fits = L::has_slice ? len >= L::elems_offset &&
                                         (len - L::elems_offset) % (L::elem_size ? L::elem_size : 1) == 0
                                   : len == L::head_size;
    if (!fits)
      throw Error(NERVE_ERR_TYPE_MISMATCH, std::to_string(len) + " bytes are not a payload of " +
                                               std::string(message_traits<T>::type_name));
    if (len > 0) std::memcpy(words_.data(), data, len);
    n_ = L::has_slice ? (len - L::elems_offset) / (L::elem_size ? L::elem_size : 1) : 0;
  }
  /// The head.
  const T& operator*() const noexcept { return *get(); }
  /// The head's fields.
  const T* operator->() const noexcept { return get(); }
  /// The head.
  const T* get() const noexcept { return std::launder(reinterpret_cast<const T*>(words_.data())); }
  /// The slice elements.
  template <class E = elem_type>
  span<const detail::type_identity_t<E>> elems() const noexcept {
    return ref().template elems<E>();
  }
  /// The payload's size in bytes.
  std::size_t size_bytes() const noexcept { return len_; }
  /// A view of it (valid while this object lives).
  SampleRef<T> ref() const noexcept {
    nerve_sample_view_t v{};
    v.data = words_.data();
    v.len = len_;
    v.elems = n_;
    return SampleRef<T>(v);
  }

 private:
  std::vector<std::uint64_t> words_;
  std::size_t len_ = 0;
  std::size_t n_ = 0;
};

// ---------------------------------------------------------------------------------------
// Actions
// ---------------------------------------------------------------------------------------

/// A goal's state: NERVE_GOAL_ACCEPTED, _EXECUTING, _CANCELING, _SUCCEEDED, _ABORTED,
/// _CANCELED.
using GoalState = nerve_goal_state_t;

/// How an action server takes new goals: NERVE_GOAL_REJECT_NEW, NERVE_GOAL_QUEUE (up to
/// `max` behind the active one), NERVE_GOAL_PREEMPT, NERVE_GOAL_PARALLEL (up to `max`).
using GoalPolicy = nerve_goal_policy_t;

/// Whether a goal in `state` has ended.
constexpr bool is_terminal(GoalState state) noexcept {
  return state == NERVE_GOAL_SUCCEEDED || state == NERVE_GOAL_ABORTED || state == NERVE_GOAL_CANCELED;
}

/// The end of a goal: its final state and result.
template <class A>
struct GoalResult {
  /// NERVE_GOAL_SUCCEEDED, NERVE_GOAL_ABORTED or NERVE_GOAL_CANCELED.
  GoalState state;
  /// The result message.
  Payload<typename action_traits<A>::result> result;
};

namespace detail {
/// The default largest action payload (goal, feedback, result) a client or server
/// copies out, in bytes.
inline constexpr std::size_t default_action_payload = 64 * 1024;
}  // namespace detail

/// A goal sent by an ActionClient<A>: its feedback, its result, cancel(). Dropping it
/// stops following the goal (the server goes on).
template <class A>
class Goal {
 public:
  /// The feedback message type.
  using feedback = typename action_traits<A>::feedback;
  /// The result message type.
  using result_type = typename action_traits<A>::result;

  /// An empty goal (holds nothing).
  Goal() noexcept = default;
  /// Takes over a goal handle; payloads up to `max_payload` bytes are copied out.
  Goal(nerve_goal_t h, std::size_t max_payload) : h_(h), buf_((max_payload + 7) / 8, 0) {}
  /// The goal's id (a UUID's text).
  std::string id() const {
    return detail::read_string([&](char* b, std::size_t c, std::size_t* n) { return nerve_goal_id(h_.get(), b, c, n); });
  }
  /// The next feedback that arrived, if any.
  std::optional<Payload<feedback>> try_feedback() {
    std::size_t len = 0;
    const nerve_status_t s = nerve_goal_try_feedback(h_.get(), buf_.data(), buf_.size() * 8, &len);
    if (!detail::check(s)) return std::nullopt;
    return Payload<feedback>(buf_.data(), len);
  }
  /// Waits up to `timeout` (nerve::forever: until it ends) for the result.
  template <class Rep, class Period>
  std::optional<GoalResult<A>> result(std::chrono::duration<Rep, Period> timeout) {
    nerve_goal_state_t st = NERVE_GOAL_ACCEPTED;
    std::size_t len = 0;
    const nerve_status_t s = nerve_goal_result(h_.get(), detail::timeout_i64(timeout), &st,
                                               buf_.data(), buf_.size() * 8, &len);
    if (!detail::check(s)) return std::nullopt;
    return GoalResult<A>{st, Payload<result_type>(buf_.data(), len)};
  }
  /// Waits until the goal ends; its result.
  GoalResult<A> result() {
    for (;;) {
      if (auto r = result(forever)) return std::move(*r);
      if (shutdown_requested_()) throw Error(NERVE_NOTHING, "a shutdown was requested before the goal ended");
    }
  }
  /// Asks the server to cancel the goal; its state after the request.
  GoalState cancel() {
    nerve_goal_state_t st = NERVE_GOAL_ACCEPTED;
    detail::check(nerve_goal_cancel(h_.get(), &st));
    return st;
  }
  /// The C handle (still owned by this object).
  nerve_goal_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a goal (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  static bool shutdown_requested_() noexcept { return nerve_shutdown_requested(); }
  using Handle = detail::Owner<nerve_goal_t, &nerve_goal_destroy>;
  Handle h_;
  std::vector<std::uint64_t> buf_;
};

/// A client of the action A (a built-in action type of the library, e.g.
/// nerve::msgs::Fibonacci): sends goals.
template <class A>
class ActionClient {
 public:
  /// The goal message type.
  using goal_type = typename action_traits<A>::goal;
  /// The goal's slice element type (nerve::no_elem when there is none).
  using goal_elem = typename message_traits<goal_type>::elem_type;

  /// An empty client (holds nothing).
  ActionClient() noexcept = default;
  /// Creates a client of the action `name`; feedback and results up to `max_payload`
  /// bytes can be read.
  ActionClient(const Node& node, std::string_view name,
               std::size_t max_payload = detail::default_action_payload)
      : max_payload_(max_payload) {
    const std::string n(name), t(action_traits<A>::type_name);
    nerve_action_client_t h{};
    detail::check(nerve_action_client_create(node.handle(), n.c_str(), t.c_str(), &h));
    h_ = Handle(h);
  }
  /// Waits up to `timeout` for the server; whether it is there.
  template <class Rep, class Period>
  bool wait_for_server(std::chrono::duration<Rep, Period> timeout) {
    return detail::check(nerve_action_client_wait_for_server(h_.get(), detail::timeout_u64(timeout)));
  }
  /// The action's resolved name: namespace, private name and remap rules applied
  /// ("/robot1/fibonacci").
  std::string name() const {
    return detail::read_string(
        [&](char* b, std::size_t c, std::size_t* n) { return nerve_action_client_name(h_.get(), b, c, n); });
  }
  /// Sends a goal and waits for the server to accept it; a rejection throws
  /// nerve::Rejected (NERVE_ERR_REJECTED) with the server's reason, no server
  /// nerve::NoServer.
  Goal<A> send_goal(const goal_type& goal) {
    auto [data, len] = packer_.pack(goal, static_cast<const span<const goal_elem>*>(nullptr));
    return send_raw(data, len);
  }
  /// Sends a goal of `head` and slice `elems`.
  Goal<A> send_goal(const goal_type& head, span<const goal_elem> elems) {
    auto [data, len] = packer_.pack(head, &elems);
    return send_raw(data, len);
  }
  /// The C handle (still owned by this object).
  nerve_action_client_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a client (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  Goal<A> send_raw(const void* data, std::size_t len) {
    nerve_goal_t g{};
    detail::check(nerve_action_client_send_goal(h_.get(), data, len, &g));
    return Goal<A>(g, max_payload_);
  }
  using Handle = detail::Owner<nerve_action_client_t, &nerve_action_client_destroy>;
  Handle h_;
  std::size_t max_payload_ = detail::default_action_payload;
  detail::packer<goal_type> packer_;
};

/// A goal accepted by an ActionServer<A>: read it, send feedback, end it once
/// (succeed, abort or canceled).
template <class A>
class ServerGoal {
 public:
  /// The goal message type.
  using goal_type = typename action_traits<A>::goal;
  /// The feedback message type.
  using feedback = typename action_traits<A>::feedback;
  /// The result message type.
  using result_type = typename action_traits<A>::result;
  /// The feedback's slice element type.
  using feedback_elem = typename message_traits<feedback>::elem_type;
  /// The result's slice element type.
  using result_elem = typename message_traits<result_type>::elem_type;

  /// Takes over a server-goal handle and copies its goal out.
  explicit ServerGoal(nerve_server_goal_t h) : h_(h), goal_(fetch(h)) {}
  /// The goal.
  const goal_type& operator*() const noexcept { return *goal_; }
  /// The goal's fields.
  const goal_type* operator->() const noexcept { return goal_.get(); }
  /// The goal message (with its slice elements).
  const Payload<goal_type>& goal() const noexcept { return goal_; }
  /// The goal's id (a UUID's text).
  std::string id() const {
    return detail::read_string([&](char* b, std::size_t c, std::size_t* n) { return nerve_server_goal_id(h_.get(), b, c, n); });
  }
  /// Whether the client asked to cancel the goal.
  bool is_canceling() const {
    bool c = false;
    detail::check(nerve_server_goal_is_canceling(h_.get(), &c));
    return c;
  }
  /// Sends feedback.
  void send_feedback(const feedback& f) {
    detail::packer<feedback> p;
    auto [data, len] = p.pack(f, static_cast<const span<const feedback_elem>*>(nullptr));
    detail::check(nerve_server_goal_feedback(h_.get(), data, len));
  }
  /// Sends feedback of `head` and slice `elems`.
  void send_feedback(const feedback& head, span<const feedback_elem> elems) {
    detail::packer<feedback> p;
    auto [data, len] = p.pack(head, &elems);
    detail::check(nerve_server_goal_feedback(h_.get(), data, len));
  }
  /// Ends the goal: succeeded, with `result`.
  void succeed(const result_type& result) { end(NERVE_GOAL_SUCCEEDED, result, span<const result_elem>()); }
  /// Ends the goal: succeeded, with `head` and slice `elems`.
  void succeed(const result_type& head, span<const result_elem> elems) { end(NERVE_GOAL_SUCCEEDED, head, elems); }
  /// Ends the goal: aborted by the server.
  void abort(const result_type& result) { end(NERVE_GOAL_ABORTED, result, span<const result_elem>()); }
  /// Ends the goal: canceled (after is_canceling()).
  void canceled(const result_type& result) { end(NERVE_GOAL_CANCELED, result, span<const result_elem>()); }
  /// Ends the goal in `state` (succeeded, aborted or canceled) with `head` and `elems`.
  void end(GoalState state, const result_type& head, span<const result_elem> elems) {
    detail::packer<result_type> p;
    auto [data, len] = elems.empty() ? p.pack(head, static_cast<const span<const result_elem>*>(nullptr))
                                     : p.pack(head, &elems);
    detail::check(nerve_server_goal_end(h_.get(), static_cast<std::int32_t>(state), data, len));
  }
  /// The C handle (still owned by this object).
  nerve_server_goal_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a goal (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  static Payload<goal_type> fetch(nerve_server_goal_t h) {
    std::vector<std::uint64_t> buf(64);
    std::size_t len = 0;
    nerve_status_t s = nerve_server_goal_data(h, buf.data(), buf.size() * 8, &len);
    if (s == NERVE_ERR_BUFFER_TOO_SMALL) {
      buf.assign((len + 7) / 8, 0);
      s = nerve_server_goal_data(h, buf.data(), buf.size() * 8, &len);
    }
    if (detail::is_error(s)) {
      const std::string m = detail::last_error();
      (void)nerve_server_goal_destroy(h);
      detail::throw_error(s, m);
    }
    return Payload<goal_type>(buf.data(), len);
  }
  using Handle = detail::Owner<nerve_server_goal_t, &nerve_server_goal_destroy>;
  Handle h_;
  Payload<goal_type> goal_;
};

namespace detail {
template <class A, class F>
struct GoalDecider {
  using G = typename action_traits<A>::goal;
  F* f;
  static std::int32_t call(void* user, const void* goal, std::size_t len) noexcept {
    auto* self = static_cast<GoalDecider*>(user);
    try {
      using GL = layout<G>;
      nerve_sample_view_t v{};
      v.data = goal;
      v.len = len;
      v.elems = GL::has_slice && len >= GL::elems_offset ? (len - GL::elems_offset) / (GL::elem_size ? GL::elem_size : 1) : 0;
      const SampleRef<G> ref(v);
      bool accept = true;
      if constexpr (std::is_invocable_r_v<bool, F&, const SampleRef<G>&>) {
        accept = (*self->f)(ref);
      } else if constexpr (std::is_invocable_r_v<bool, F&, const G&>) {
        accept = (*self->f)(*ref);
      } else if constexpr (std::is_invocable_v<F&, const SampleRef<G>&>) {
        (*self->f)(ref);
      } else if constexpr (std::is_invocable_v<F&, const G&>) {
        (*self->f)(*ref);
      } else {
        static_assert(dependent_false<F>,
                      "nerve: a goal callback takes nerve::SampleRef<Goal> or const Goal& and "
                      "returns bool (false rejects) or nothing (throw to reject)");
      }
      if (accept) return 0;
      nerve_callback_fail("the server rejected the goal");
      return 1;
    } catch (...) {
      record_exception(nullptr);  // the message is the rejection's reason
      return 1;
    }
  }
};
}  // namespace detail

/// The server of the action A: spin_once() handles goal, cancel and result requests
/// (deciding on new goals), take_goal() hands out the accepted ones.
template <class A>
class ActionServer {
 public:
  /// An empty server (holds nothing).
  ActionServer() noexcept = default;
  /// Creates the server of the action `name` with a goal policy (`max`: the queue's
  /// bound for NERVE_GOAL_QUEUE, the goals at once for NERVE_GOAL_PARALLEL).
  ActionServer(const Node& node, std::string_view name, GoalPolicy policy = NERVE_GOAL_REJECT_NEW,
               std::size_t max = 1) {
    const std::string n(name), t(action_traits<A>::type_name);
    nerve_action_server_t h{};
    detail::check(nerve_action_server_create(node.handle(), n.c_str(), t.c_str(),
                                             static_cast<std::int32_t>(policy), max, &h));
    h_ = Handle(h);
  }
  /// The action's resolved name: namespace, private name and remap rules applied.
  std::string name() const {
    return detail::read_string(
        [&](char* b, std::size_t c, std::size_t* n) { return nerve_action_server_name(h_.get(), b, c, n); });
  }
  /// Waits up to `timeout` for requests and handles them, accepting every new goal (the
  /// policy permitting); the requests handled.
  template <class Rep, class Period>
  std::size_t spin_once(std::chrono::duration<Rep, Period> timeout) {
    std::size_t n = 0;
    detail::check(nerve_action_server_spin_once(h_.get(), detail::timeout_u64(timeout), nullptr, nullptr, &n));
    return n;
  }
  /// As spin_once(timeout), deciding on each new goal with `on_goal`: it takes
  /// `SampleRef<Goal>` or `const Goal&` and returns bool (false rejects), or returns
  /// nothing and throws to reject (the exception's message is the client's reason).
  template <class Rep, class Period, class F>
  std::size_t spin_once(std::chrono::duration<Rep, Period> timeout, F&& on_goal) {
    using D = detail::GoalDecider<A, std::remove_reference_t<F>>;
    D d{&on_goal};
    std::size_t n = 0;
    detail::check(nerve_action_server_spin_once(h_.get(), detail::timeout_u64(timeout), &D::call, &d, &n));
    return n;
  }
  /// The next accepted goal, if any.
  std::optional<ServerGoal<A>> take_goal() {
    nerve_server_goal_t g{};
    if (!detail::check(nerve_action_server_take_goal(h_.get(), &g))) return std::nullopt;
    return std::optional<ServerGoal<A>>(std::in_place, g);
  }
  /// The C handle (still owned by this object).
  nerve_action_server_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a server (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  using Handle = detail::Owner<nerve_action_server_t, &nerve_action_server_destroy>;
  Handle h_;
};

// ---------------------------------------------------------------------------------------
// Tensors
// ---------------------------------------------------------------------------------------

/// A tensor's element type.
enum class DType : std::int32_t {
  u8 = NERVE_DTYPE_U8,
  i8 = NERVE_DTYPE_I8,
  u16 = NERVE_DTYPE_U16,
  i16 = NERVE_DTYPE_I16,
  u32 = NERVE_DTYPE_U32,
  i32 = NERVE_DTYPE_I32,
  u64 = NERVE_DTYPE_U64,
  i64 = NERVE_DTYPE_I64,
  f16 = NERVE_DTYPE_F16,
  f32 = NERVE_DTYPE_F32,
  f64 = NERVE_DTYPE_F64,
  boolean = NERVE_DTYPE_BOOL,
};

/// The DType of element type T (f16 has no C++17 type: use DType::f16 with std::uint16_t).
template <class T>
constexpr DType dtype_of() noexcept {
  if constexpr (std::is_same_v<T, bool>) return DType::boolean;
  else if constexpr (std::is_same_v<T, float>) return DType::f32;
  else if constexpr (std::is_same_v<T, double>) return DType::f64;
  else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T> && sizeof(T) == 1) return DType::u8;
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T> && sizeof(T) == 1) return DType::i8;
  else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T> && sizeof(T) == 2) return DType::u16;
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T> && sizeof(T) == 2) return DType::i16;
  else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T> && sizeof(T) == 4) return DType::u32;
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T> && sizeof(T) == 4) return DType::i32;
  else if constexpr (std::is_integral_v<T> && std::is_unsigned_v<T> && sizeof(T) == 8) return DType::u64;
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T> && sizeof(T) == 8) return DType::i64;
  else static_assert(detail::dependent_false<T>, "nerve: no tensor dtype for this type");
}

/// The descriptor of a frozen tensor (the message `nerve/TensorDescriptor`): publish it
/// on a topic (Publisher<TensorDescriptor>), open the tensor on the other side
/// (Tensor::open). Its fields are the Rust struct's.
struct TensorDescriptor {
  std::uint8_t pool[32];     ///< The pool's name (NUL-padded).
  std::uint64_t pool_id;     ///< The pool's identity.
  std::uint32_t slot;        ///< The slot of the tensor.
  std::uint32_t generation;  ///< The slot's generation (a stale descriptor fails to open).
  std::uint8_t dtype;        ///< The element type (DType).
  std::uint8_t ndim;         ///< Dimensions in use.
  std::uint8_t reserved[6];  ///< Zero.
  std::uint64_t shape[8];    ///< The dimensions (C order).
  std::uint64_t len_bytes;   ///< Bytes in use.
  std::uint64_t user;        ///< Free for the application.
};
static_assert(sizeof(TensorDescriptor) == 136 && alignof(TensorDescriptor) == 8);
static_assert(offsetof(TensorDescriptor, shape) == 56 && offsetof(TensorDescriptor, user) == 128);

/// The message traits of TensorDescriptor: its schema comes from the library.
template <>
struct message_traits<TensorDescriptor> {
  using elem_type = no_elem;
  static constexpr std::string_view type_name = "nerve/TensorDescriptor";
  static constexpr bool sealed = false;
  static constexpr std::size_t head_size = sizeof(TensorDescriptor);
  static constexpr std::size_t elems_offset = sizeof(TensorDescriptor);
  static std::string_view schema_text() { return nerve_tensor_descriptor_schema(); }
};

/// A tensor in shared memory: allocated from a TensorPool (writable until freeze()),
/// or opened from a descriptor (read-only, zero-copy).
class Tensor {
 public:
  /// An empty tensor (holds nothing).
  Tensor() noexcept = default;
  /// Takes over a tensor handle with its info.
  Tensor(nerve_tensor_t h, const nerve_tensor_info_t& info) noexcept : h_(h), info_(info) {}
  /// Opens the tensor `d` names (zero-copy, read-only).
  static Tensor open(const Context& ctx, const TensorDescriptor& d) { return open(ctx, &d, sizeof d); }
  /// Opens the tensor a descriptor payload of `len` bytes names.
  static Tensor open(const Context& ctx, const void* descriptor, std::size_t len) {
    nerve_tensor_t h{};
    nerve_tensor_info_t info{};
    detail::check(nerve_tensor_open(ctx.handle(), descriptor, len, &h, &info));
    return Tensor(h, info);
  }
  /// Its bytes (64-byte aligned).
  void* data() {
    check();
    return info_.data;
  }
  /// Its bytes (64-byte aligned).
  const void* data() const {
    check();
    return info_.data;
  }
  /// Bytes in use.
  std::size_t size_bytes() const noexcept { return info_.len_bytes; }
  /// The element type.
  DType dtype() const noexcept { return static_cast<DType>(info_.dtype); }
  /// The dimensions (C order).
  span<const std::size_t> shape() const noexcept { return span<const std::size_t>(info_.shape, info_.ndim); }
  /// Elements in all.
  std::size_t elements() const noexcept {
    std::size_t n = 1;
    for (std::size_t i = 0; i < info_.ndim; ++i) n *= info_.shape[i];
    return n;
  }
  /// Whether it is frozen (read-only).
  bool frozen() const noexcept { return info_.frozen; }
  /// Its elements, writable (throws unless T is its dtype and it is not frozen).
  template <class T>
  span<T> as() {
    check_type<T>();
    if (info_.frozen) throw Error(NERVE_ERR_TENSOR, "the tensor is frozen (read-only)");
    return span<T>(static_cast<T*>(info_.data), elements());
  }
  /// Its elements, read-only (throws unless T is its dtype).
  template <class T>
  span<const T> view() const {
    check_type<T>();
    return span<const T>(static_cast<const T*>(info_.data), elements());
  }
  /// Ends the writing: read-only and sendable from now.
  void freeze() {
    detail::check(nerve_tensor_freeze(h_.get()));
    detail::check(nerve_tensor_info(h_.get(), &info_));
  }
  /// The descriptor to publish (the tensor must be frozen).
  TensorDescriptor descriptor() const {
    TensorDescriptor d{};
    std::size_t len = 0;
    detail::check(nerve_tensor_descriptor(h_.get(), &d, sizeof d, &len));
    return d;
  }
  /// The C handle (still owned by this object).
  nerve_tensor_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a tensor (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  void check() const {
    if (!h_.valid()) detail::throw_stale("the tensor", {});
  }
  template <class T>
  void check_type() const {
    check();
    if (dtype_of<std::remove_cv_t<T>>() != dtype() &&
        !(dtype() == DType::f16 && std::is_same_v<std::remove_cv_t<T>, std::uint16_t>))
      throw Error(NERVE_ERR_TYPE_MISMATCH, "the tensor's dtype is " + std::to_string(info_.dtype) +
                                               ", not " + std::to_string(static_cast<int>(dtype_of<std::remove_cv_t<T>>())));
  }
  using Handle = detail::Owner<nerve_tensor_t, &nerve_tensor_destroy>;
  Handle h_;
  nerve_tensor_info_t info_{};
};

/// A pool of shared-memory tensor slots of a domain.
class TensorPool {
 public:
  /// An empty pool (holds nothing).
  TensorPool() noexcept = default;
  /// Creates the pool `name`: `slots` slots of `slot_bytes` each.
  static TensorPool create(const Context& ctx, std::string_view name, std::size_t slots, std::size_t slot_bytes) {
    const std::string n(name);
    nerve_tensor_pool_t h{};
    detail::check(nerve_tensor_pool_create(ctx.handle(), n.c_str(), slots, slot_bytes, &h));
    return TensorPool(h);
  }
  /// Opens the existing pool `name`.
  static TensorPool open(const Context& ctx, std::string_view name) {
    const std::string n(name);
    nerve_tensor_pool_t h{};
    detail::check(nerve_tensor_pool_open(ctx.handle(), n.c_str(), &h));
    return TensorPool(h);
  }
  /// Allocates a tensor of `shape` and `dtype` in a free slot (a full pool throws
  /// nerve::Error NERVE_ERR_TENSOR).
  Tensor alloc(span<const std::size_t> shape, DType dtype) {
    nerve_tensor_t h{};
    nerve_tensor_info_t info{};
    detail::check(nerve_tensor_alloc(h_.get(), shape.data(), shape.size(),
                                     static_cast<std::int32_t>(dtype), &h, &info));
    return Tensor(h, info);
  }
  /// Allocates a tensor of `shape` and `dtype`.
  Tensor alloc(std::initializer_list<std::size_t> shape, DType dtype) {
    return alloc(span<const std::size_t>(shape.begin(), shape.size()), dtype);
  }
  /// Allocates a tensor of `shape` with elements of type T.
  template <class T>
  Tensor alloc(std::initializer_list<std::size_t> shape) {
    return alloc(shape, dtype_of<T>());
  }
  /// The C handle (still owned by this object).
  nerve_tensor_pool_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a pool (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  explicit TensorPool(nerve_tensor_pool_t h) noexcept : h_(h) {}
  using Handle = detail::Owner<nerve_tensor_pool_t, &nerve_tensor_pool_destroy>;
  Handle h_;
};

// ---------------------------------------------------------------------------------------
// Node factories, process-wide calls
// ---------------------------------------------------------------------------------------

template <class T>
Publisher<T> Node::publisher(std::string_view topic, const Qos& qos) {
  return Publisher<T>(*this, topic, qos);
}
template <class T>
Subscriber<T> Node::subscriber(std::string_view topic, const Qos& qos) {
  return Subscriber<T>(*this, topic, qos);
}
template <class S>
Client<S> Node::client(std::string_view name) {
  return Client<S>(*this, name);
}
template <class S>
Server<S> Node::server(std::string_view name) {
  return Server<S>(*this, name);
}
inline Parameters Node::parameters() { return Parameters(*this); }

/// Asks every executor of the process to stop, as SIGTERM does (any thread).
inline void shutdown_request() noexcept { nerve_shutdown_request(); }
/// Whether a shutdown was requested (SIGINT, SIGTERM or shutdown_request()).
inline bool shutdown_requested() noexcept { return nerve_shutdown_requested(); }
/// Installs Nerve's SIGINT/SIGTERM handlers (the first signal requests a shutdown).
inline void install_shutdown_handlers() noexcept { nerve_shutdown_install_handlers(); }
/// Live handles of this thread (for tests and leak checks).
inline std::size_t live_handles() noexcept { return nerve_live_handles(); }

}  // namespace nerve

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
