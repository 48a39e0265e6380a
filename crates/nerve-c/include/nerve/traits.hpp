// Nerve C++ API: what a message, service or action type tells the library about itself.
// Generated headers (`nerve types gen-cpp`) and the NERVE_MESSAGE macro specialise these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace nerve {

/// A message type: `type_name` ("pkg/Name"), `elem_type` (the slice element that follows
/// the head in a sample, or `no_elem`), `head_size` (bytes of the head: `sizeof(T)`, but 0
/// for an empty message) and `elems_offset` (where the slice starts: the head size rounded
/// up to the element's alignment), `sealed`, and the schema (the `nerve-schema/1` text
/// the Rust side checks):
/// - generated headers (`nerve types gen-cpp`): `sealed = true`, `schema_text` a
///   `constexpr std::string_view` and `layout_hash` (its identity on topics) a
///   `constexpr std::uint64_t`;
/// - `NERVE_MESSAGE` (nerve/message.hpp): `sealed = false`, `schema_text()` a function
///   returning the text with the unsealed hash (all zeros), and no `layout_hash`: the
///   C ABI seals the text (computes the hash from the layout, as Rust does).
/// `schema_text_of<T>()` reads either.
template <class T>
struct message_traits;

/// A service type: `type_name`, `request` and `response` message types.
template <class S>
struct service_traits;

/// An action type: `type_name`, `goal`, `feedback` and `result` message types.
template <class A>
struct action_traits;

/// The `elem_type` of a message without a slice.
struct no_elem {};

/// A type as a value, for visitors (`struct_traits::visit`).
template <class T>
struct type_tag {
  using type = T;
};

/// A struct as Nerve describes it: `name` (a `std::string_view`: the name of the
/// equivalent Rust struct, part of the layout hash) and `template <class V> static void
/// visit(V& v)`, which calls `v(type_tag<F>{}, "field", offset)` for every field in memory
/// order. Generated headers specialise it for every non-empty struct; `NERVE_STRUCT` and
/// `NERVE_MESSAGE` (nerve/message.hpp) for hand-written ones.
template <class T>
struct struct_traits;

/// A hand-written Rust plain-data type whose fields Nerve does not know (an opaque shape):
/// `Size` bytes aligned to `Align`, identified by its layout hash `Hash`.
template <std::size_t Size, std::size_t Align, std::uint64_t Hash>
struct alignas(Align) Opaque {
  std::uint8_t bytes[Size];
};

/// The schema text of message type `T`, generated (`sealed`) or not.
template <class T>
constexpr std::string_view schema_text_of() {
  if constexpr (message_traits<T>::sealed) {
    return message_traits<T>::schema_text;
  } else {
    return message_traits<T>::schema_text();
  }
}

/// A NUL-padded UTF-8 string of at most N bytes, laid out as Rust's
/// `nerve_msgs::FixedStr<N>` (`[u8; N]`).
template <std::size_t N>
struct FixedStr {
  std::uint8_t bytes[N];

  /// The text up to the first NUL.
  std::string_view view() const noexcept {
    std::size_t n = 0;
    while (n < N && bytes[n] != 0) ++n;
    return std::string_view(reinterpret_cast<const char*>(bytes), n);
  }
  /// Stores `s`; returns false (and stores nothing) when it is longer than N bytes.
  bool assign(std::string_view s) noexcept {
    if (s.size() > N) return false;
    std::memset(bytes, 0, N);
    std::memcpy(bytes, s.data(), s.size());
    return true;
  }
};

}  // namespace nerve
