// Nerve C++ API: the CDR runtime of generated ROS 2 message classes (`nerve types gen-cpp`
// from `.msg/.srv/.action`). Header-only, no dependency on the C ABI.
//
// CDR here is what ROS 2 (Fast DDS, XCDR1) and `nerve-ros2-types`' CdrWriter/CdrReader
// write and read, byte for byte:
// - a 4-byte encapsulation header (`00 01 00 00`: little endian; `00 00 00 00`, big
//   endian, is read too);
// - primitives aligned to their size relative to the first byte after the header;
// - a string: a u32 length including the NUL, the bytes, the NUL (UTF-8, checked both
//   ways); a wstring: a u32 count of UTF-16 code units, then each unit as a u32;
// - a sequence (bounded or not): a u32 count, then the elements; a fixed array: the
//   elements only; a nested message: its fields.
// Reading never runs past the end, refuses a bool other than 0 or 1, a length past the
// bytes left, a bound exceeded and invalid text: every failure is a nerve::cdr::Error
// naming the field. Writing refuses a bound exceeded and invalid text the same way.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nerve/msgs/time.hpp>
#include <nerve/msgs/twist.hpp>
#include <nerve/msgs/vector3.hpp>

namespace nerve::cdr {

/// A message that cannot be written or read as CDR: what() names the field and why.
class Error : public std::runtime_error {
 public:
  /// An error with `message`.
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// No bound (an unbounded string or sequence).
inline constexpr std::uint32_t unbounded = 0xFFFFFFFFu;

namespace detail {

/// Whether `s` is valid UTF-8 (what Rust's `str::from_utf8` accepts).
inline bool valid_utf8(std::string_view s) noexcept {
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if ((c & 0xE0u) == 0xC0u) {
      len = 2;
      cp = c & 0x1Fu;
    } else if ((c & 0xF0u) == 0xE0u) {
      len = 3;
      cp = c & 0x0Fu;
    } else if ((c & 0xF8u) == 0xF0u) {
      len = 4;
      cp = c & 0x07u;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0u) != 0x80u) return false;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    if ((len == 2 && cp < 0x80u) || (len == 3 && cp < 0x800u) || (len == 4 && cp < 0x10000u) ||
        cp > 0x10FFFFu || (cp >= 0xD800u && cp < 0xE000u)) {
      return false;
    }
    i += len;
  }
  return true;
}

/// Whether `s` is valid UTF-16 (every surrogate paired).
inline bool valid_utf16(std::u16string_view s) noexcept {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char16_t u = s[i];
    if (u >= 0xD800 && u < 0xDC00) {
      if (i + 1 >= s.size() || s[i + 1] < 0xDC00 || s[i + 1] >= 0xE000) return false;
      ++i;
    } else if (u >= 0xDC00 && u < 0xE000) {
      return false;
    }
  }
  return true;
}

template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};
template <class T>
struct is_array : std::false_type {};
template <class T, std::size_t N>
struct is_array<std::array<T, N>> : std::true_type {};

}  // namespace detail

/// Appends CDR (little endian) to a byte vector.
class Writer {
 public:
  /// Appends the encapsulation header to `out`; what follows is written after it.
  explicit Writer(std::vector<std::uint8_t>& out) : out_(out), base_(out.size() + 4) {
    const std::uint8_t header[4] = {0x00, 0x01, 0x00, 0x00};
    out_.insert(out_.end(), header, header + 4);
  }
  /// Pads to a multiple of `n` bytes from the first byte after the header.
  void align(std::size_t n) {
    const std::size_t rel = out_.size() - base_;
    const std::size_t pad = (n - rel % n) % n;
    out_.insert(out_.end(), pad, std::uint8_t{0});
  }
  /// A primitive (bool as one byte 0 or 1), aligned to its size, little endian.
  template <class T>
  void prim(T v) {
    static_assert(std::is_arithmetic_v<T>, "a CDR primitive");
    if constexpr (std::is_same_v<T, bool>) {
      out_.push_back(v ? 1 : 0);
    } else {
      align(sizeof(T));
      std::uint8_t b[sizeof(T)];
      std::memcpy(b, &v, sizeof(T));
      if (!little()) reverse(b, sizeof(T));
      out_.insert(out_.end(), b, b + sizeof(T));
    }
  }
  /// A sequence length of `n` elements, refused above `bound` (`field` names it).
  void length(std::size_t n, std::uint32_t bound, const char* field) {
    if (n > bound) {
      throw Error(std::string(field) + ": " + std::to_string(n) + " elements exceed its bound of " +
                  std::to_string(bound));
    }
    prim(static_cast<std::uint32_t>(n));
  }
  /// A string of at most `bound` bytes (checked UTF-8).
  void string(std::string_view s, std::uint32_t bound, const char* field) {
    if (s.size() > bound) {
      throw Error(std::string(field) + ": a string of " + std::to_string(s.size()) +
                  " bytes exceeds its bound of " + std::to_string(bound));
    }
    if (s.size() >= 0xFFFFFFFFu) throw Error(std::string(field) + ": a string over 4 GiB");
    if (!detail::valid_utf8(s)) throw Error(std::string(field) + ": a string that is not UTF-8");
    prim(static_cast<std::uint32_t>(s.size() + 1));
    out_.insert(out_.end(), s.begin(), s.end());
    out_.push_back(0);
  }
  /// A wstring of at most `bound` UTF-16 code units (checked: every surrogate paired).
  void wstring(std::u16string_view s, std::uint32_t bound, const char* field) {
    if (s.size() > bound) {
      throw Error(std::string(field) + ": a wstring of " + std::to_string(s.size()) +
                  " code units exceeds its bound of " + std::to_string(bound));
    }
    if (!detail::valid_utf16(s)) {
      throw Error(std::string(field) + ": a wstring that is not UTF-16 (an unpaired surrogate)");
    }
    length(s.size(), unbounded, field);
    for (char16_t u : s) prim(static_cast<std::uint32_t>(u));
  }
  /// Bytes written so far (header included).
  std::size_t written() const noexcept { return out_.size(); }

 private:
  static bool little() noexcept {
    const std::uint16_t one = 1;
    std::uint8_t b = 0;
    std::memcpy(&b, &one, 1);
    return b == 1;
  }
  static void reverse(std::uint8_t* b, std::size_t n) noexcept {
    for (std::size_t i = 0; i < n / 2; ++i) {
      const std::uint8_t t = b[i];
      b[i] = b[n - 1 - i];
      b[n - 1 - i] = t;
    }
  }
  std::vector<std::uint8_t>& out_;
  std::size_t base_;
};

/// Reads CDR (either byte order) from bytes it does not own.
class Reader {
 public:
  /// Checks the encapsulation header of `data` (`len` bytes).
  Reader(const std::uint8_t* data, std::size_t len) : data_(data), len_(len), pos_(4) {
    if (len < 4) {
      throw Error("CDR of " + std::to_string(len) + " bytes: shorter than its 4-byte header");
    }
    if (data[0] != 0x00 || (data[1] != 0x01 && data[1] != 0x00)) {
      throw Error("CDR with encapsulation " + std::to_string(data[0]) + " " +
                  std::to_string(data[1]) + ": only plain CDR (00 00, 00 01) is read");
    }
    big_ = data[1] == 0x00;
  }
  /// Skips padding to a multiple of `n` bytes from the first byte after the header.
  void align(std::size_t n, const char* field) {
    const std::size_t rel = pos_ - 4;
    const std::size_t pad = (n - rel % n) % n;
    need(pad, field);
    pos_ += pad;
  }
  /// A primitive (a bool must be 0 or 1).
  template <class T>
  void prim(T& v, const char* field) {
    static_assert(std::is_arithmetic_v<T>, "a CDR primitive");
    if constexpr (std::is_same_v<T, bool>) {
      need(1, field);
      const std::uint8_t b = data_[pos_++];
      if (b > 1) throw Error(std::string(field) + ": a bool of value " + std::to_string(b));
      v = b == 1;
    } else {
      align(sizeof(T), field);
      need(sizeof(T), field);
      std::uint8_t b[sizeof(T)];
      std::memcpy(b, data_ + pos_, sizeof(T));
      if (big_ == little()) {
        for (std::size_t i = 0; i < sizeof(T) / 2; ++i) {
          const std::uint8_t t = b[i];
          b[i] = b[sizeof(T) - 1 - i];
          b[sizeof(T) - 1 - i] = t;
        }
      }
      std::memcpy(&v, b, sizeof(T));
      pos_ += sizeof(T);
    }
  }
  /// A sequence length: at most `bound`, and no more elements of at least `min_size`
  /// bytes than the bytes left hold.
  std::size_t length(std::uint32_t bound, std::size_t min_size, const char* field) {
    std::uint32_t n = 0;
    prim(n, field);
    if (n > bound) {
      throw Error(std::string(field) + ": " + std::to_string(n) + " elements exceed its bound of " +
                  std::to_string(bound));
    }
    if (static_cast<std::size_t>(n) > (len_ - pos_) / (min_size == 0 ? 1 : min_size)) {
      throw Error(std::string(field) + ": a length of " + std::to_string(n) + " past the " +
                  std::to_string(len_ - pos_) + " bytes left");
    }
    return n;
  }
  /// A string (its NUL dropped) of at most `bound` bytes, checked UTF-8.
  void string(std::string& s, std::uint32_t bound, const char* field) {
    align(4, field);
    std::uint32_t n = 0;
    prim(n, field);
    need(n, field);
    std::size_t len = n;
    if (len > 0 && data_[pos_ + len - 1] == 0) --len;
    if (len > bound) {
      throw Error(std::string(field) + ": a string of " + std::to_string(len) +
                  " bytes exceeds its bound of " + std::to_string(bound));
    }
    s.assign(reinterpret_cast<const char*>(data_ + pos_), len);
    if (!detail::valid_utf8(s)) throw Error(std::string(field) + ": a string that is not UTF-8");
    pos_ += n;
  }
  /// A wstring of at most `bound` code units, checked UTF-16.
  void wstring(std::u16string& s, std::uint32_t bound, const char* field) {
    const std::size_t n = length(unbounded, 4, field);
    if (n > bound) {
      throw Error(std::string(field) + ": a wstring of " + std::to_string(n) +
                  " code units exceeds its bound of " + std::to_string(bound));
    }
    s.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t u = 0;
      prim(u, field);
      if (u > 0xFFFFu) {
        throw Error(std::string(field) + ": a wide character " + std::to_string(u) +
                    " outside UTF-16");
      }
      s[i] = static_cast<char16_t>(u);
    }
    if (!detail::valid_utf16(s)) {
      throw Error(std::string(field) + ": a wstring that is not UTF-16 (an unpaired surrogate)");
    }
  }
  /// Bytes not read yet.
  std::size_t remaining() const noexcept { return len_ - pos_; }

 private:
  static bool little() noexcept {
    const std::uint16_t one = 1;
    std::uint8_t b = 0;
    std::memcpy(&b, &one, 1);
    return b == 1;
  }
  void need(std::size_t n, const char* field) const {
    if (n > len_ - pos_) {
      throw Error(std::string(field) + ": the CDR ends " + std::to_string(n - (len_ - pos_)) +
                  " bytes short");
    }
  }
  const std::uint8_t* data_;
  std::size_t len_;
  std::size_t pos_;
  bool big_ = false;
};

/// Whether two field values are equal: element by element for arrays and sequences, by
/// `nanos` for `nerve::msgs::Time` (which has no operator==), else `==`.
template <class T>
bool equal(const T& a, const T& b) {
  if constexpr (std::is_same_v<T, ::nerve::msgs::Time>) {
    return a.nanos == b.nanos;
  } else if constexpr (std::is_same_v<T, ::nerve::msgs::Vector3>) {
    return a.x == b.x && a.y == b.y && a.z == b.z;
  } else if constexpr (std::is_same_v<T, ::nerve::msgs::Twist>) {
    return equal(a.linear, b.linear) && equal(a.angular, b.angular);
  } else if constexpr (detail::is_vector<T>::value || detail::is_array<T>::value) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!equal<typename T::value_type>(a[i], b[i])) return false;
    }
    return true;
  } else {
    return a == b;
  }
}

/// A ROS 2 message type generated by `nerve types gen-cpp` (specialised in its header):
/// `type_name` ("pkg/msg/Name"), `type_hash` ("RIHS01_…"), `definition` (its `ros2msg`
/// text with every type it uses: what the Nerve topic's schema carries), `write(Writer&,
/// const T&)` and `read(Reader&, T&)`.
template <class T>
struct message_traits;

/// A ROS 2 action type generated by `nerve types gen-cpp`: `type_name`
/// ("pkg/action/Name"), `type_hash`, `definition` (the `.action`'s `ros2msg` text), and
/// the `Goal`, `Result` and `Feedback` message types.
template <class A>
struct action_traits;

/// A ROS 2 service type generated by `nerve types gen-cpp` from a `.srv`: `type_name`
/// ("pkg/srv/Name"), the `Request` and `Response` message types.
template <class S>
struct service_traits;

/// The CDR of `m` (header included).
template <class T>
std::vector<std::uint8_t> serialize(const T& m) {
  std::vector<std::uint8_t> out;
  Writer w(out);
  message_traits<T>::write(w, m);
  return out;
}

/// Appends the CDR of `m` (header included) to `out`.
template <class T>
void serialize_into(const T& m, std::vector<std::uint8_t>& out) {
  Writer w(out);
  message_traits<T>::write(w, m);
}

/// The message of type T that `len` bytes of CDR hold (trailing bytes are padding and
/// ignored, as DDS pads payloads); throws nerve::cdr::Error when they do not.
template <class T>
T deserialize(const std::uint8_t* data, std::size_t len) {
  Reader r(data, len);
  T m;
  message_traits<T>::read(r, m);
  return m;
}

}  // namespace nerve::cdr

namespace nerve::msgs {

/// `builtin_interfaces/msg/Time` (int32 sec, uint32 nanosec) as Nerve's own Time (ns since
/// the epoch), as the ROS 2 bridge converts it (`nerve-ros2-map`): a time outside
/// int32 seconds is refused, never cut.
inline void cdr_write(::nerve::cdr::Writer& w, const Time& t, const char* field) {
  std::int64_t sec = t.nanos / 1000000000;
  std::int64_t ns = t.nanos % 1000000000;
  if (ns < 0) {
    ns += 1000000000;
    sec -= 1;
  }
  if (sec < INT32_MIN || sec > INT32_MAX) {
    throw ::nerve::cdr::Error(std::string(field) + ": " + std::to_string(t.nanos) +
                              " ns is out of builtin_interfaces/Time's range");
  }
  w.prim(static_cast<std::int32_t>(sec));
  w.prim(static_cast<std::uint32_t>(ns));
}

/// Reads `builtin_interfaces/msg/Time` into Nerve's Time (sec * 1e9 + nanosec).
inline void cdr_read(::nerve::cdr::Reader& r, Time& t, const char* field) {
  std::int32_t sec = 0;
  std::uint32_t nanosec = 0;
  r.prim(sec, field);
  r.prim(nanosec, field);
  t.nanos = static_cast<std::int64_t>(sec) * 1000000000 + static_cast<std::int64_t>(nanosec);
}

/// `geometry_msgs/msg/Vector3` as Nerve's own Vector3 (the same three float64).
inline void cdr_write(::nerve::cdr::Writer& w, const Vector3& v, const char* = "Vector3") {
  w.prim(v.x);
  w.prim(v.y);
  w.prim(v.z);
}

/// Reads `geometry_msgs/msg/Vector3` into Nerve's Vector3.
inline void cdr_read(::nerve::cdr::Reader& r, Vector3& v, const char* field = "Vector3") {
  r.prim(v.x, field);
  r.prim(v.y, field);
  r.prim(v.z, field);
}

/// `geometry_msgs/msg/Twist` as Nerve's own Twist (linear, angular).
inline void cdr_write(::nerve::cdr::Writer& w, const Twist& t, const char* field = "Twist") {
  cdr_write(w, t.linear, field);
  cdr_write(w, t.angular, field);
}

/// Reads `geometry_msgs/msg/Twist` into Nerve's Twist.
inline void cdr_read(::nerve::cdr::Reader& r, Twist& t, const char* field = "Twist") {
  cdr_read(r, t.linear, field);
  cdr_read(r, t.angular, field);
}

}  // namespace nerve::msgs
