// Nerve C++ API: describing hand-written C++ message structs to Nerve.
//
// Two kinds of message types reach `nerve::message_traits`:
//
// - Generated (`nerve types gen-cpp`, e.g. <nerve/msgs/imu.hpp>): from the Rust type's
//   schema. `sealed` is true, `layout_hash` is a constexpr std::uint64_t and
//   `schema_text` a constexpr std::string_view: both are the Rust type's own, final.
//
// - Declared with NERVE_MESSAGE (this header): the schema is built at run time from the
//   C++ field types, and `schema_text()` is a function returning it. C++ cannot compute
//   the Rust layout hash at compile time, so the text is *unsealed*: its hash field is
//   all zeros (`hash=0000000000000000`), `sealed` is false and there is no `layout_hash`.
//   The C ABI seals it (`nerve_schema_seal`; in Rust `nerve_c::codegen::seal`): it decodes
//   the text with every layout check `Schema::decode` makes and replaces the zeros with
//   the hash the layout computes to (`Schema::computed_hash`), the same hash an equivalent
//   Rust `#[derive(Message)]` struct has. Until then the type has no identity on topics.
//
// Usage, at global scope (not inside a namespace), with a trailing semicolon:
//
//     namespace my_pkg {
//     struct Corner { float x; float y; };
//     struct Pose2D { nerve::msgs::Header header; double x, y, theta; Corner corners[4]; };
//     }
//     NERVE_STRUCT(my_pkg::Corner, x, y);
//     NERVE_MESSAGE(my_pkg::Pose2D, "my_pkg/Pose2D", header, x, y, theta, corners);
//
// - List every field, in declaration order (at most 32); the struct must be
//   standard-layout, trivially copyable and without padding (make it an explicit
//   `reserved` field, as Rust messages do). Each of these is a static_assert.
// - Field types: the fixed-width integers (std::int8_t ... std::uint64_t; any integer type
//   by its size and signedness), float, double, enums (as their underlying type),
//   std::array<T, N> and T[N], nerve::FixedStr<N>, nerve::Opaque<Size, Align, Hash>, and
//   structs that have `nerve::struct_traits`: every non-empty generated struct and
//   message (nerve::msgs::Header, nerve::msgs::Twist, ...) and those declared with
//   NERVE_STRUCT or NERVE_MESSAGE (declared before the message that embeds them).
//   bool, char and long double have no Rust plain-data equivalent and are refused.
// - The struct's name in the schema is the bare C++ type name (`Pose2D` for
//   my_pkg::Pose2D), as a Rust derive names the equivalent struct; pass the type
//   qualified from the global namespace (`::msgs::Foo`) when its namespace could be
//   mistaken for one inside `nerve` (`nerve::msgs`). Types whose name has a comma
//   (template arguments) need an alias first.
// - NERVE_MESSAGE gives `elem_type = nerve::no_elem`: a message without a slice.
// - MSVC needs its conforming preprocessor (/Zc:preprocessor).
//
// Self-contained: the standard library and <nerve/traits.hpp> only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nerve/traits.hpp>

namespace nerve {
namespace detail {

// The layout hash of Nerve (FNV-1a, as `nerve::message::layout` computes it).
inline constexpr std::uint64_t fnv_offset = 0xcbf29ce484222325ULL;
inline constexpr std::uint64_t fnv_prime = 0x00000100000001b3ULL;

constexpr std::uint64_t hash_str(std::uint64_t h, std::string_view s) noexcept {
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= fnv_prime;
  }
  h ^= 0xff;
  return h * fnv_prime;
}

constexpr std::uint64_t hash_u64(std::uint64_t h, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= fnv_prime;
  }
  return h;
}

/// The layout hash of Rust's `nerve_msgs::FixedStr<N>`: that of `[u8; N]` with a tag.
constexpr std::uint64_t fixed_str_hash(std::size_t n) noexcept {
  return hash_u64(hash_u64(hash_str(fnv_offset, "u8"), n), 0x5b5d) ^ 0x53545221ULL;
}

/// `my_pkg::Pose2D` -> `Pose2D`.
constexpr std::string_view bare_name(std::string_view s) noexcept {
  std::size_t colons = s.rfind("::");
  if (colons != std::string_view::npos) s.remove_prefix(colons + 2);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

/// Whether offsets are strictly ascending (fields listed in memory order).
constexpr bool ascending(std::initializer_list<std::size_t> offsets) noexcept {
  bool first = true;
  std::size_t last = 0;
  for (std::size_t o : offsets) {
    if (!first && o <= last) return false;
    first = false;
    last = o;
  }
  return true;
}

/// A message type name: `pkg/Name`, printable ASCII without `|`, `=` or spaces.
constexpr bool valid_type_name(std::string_view s) noexcept {
  if (s.empty() || s.find('/') == std::string_view::npos) return false;
  for (char c : s) {
    if (c <= ' ' || c > '~' || c == '|' || c == '=') return false;
  }
  return true;
}

template <class T>
struct always_false : std::false_type {};

template <class T>
struct array_info : std::false_type {};
template <class T, std::size_t N>
struct array_info<std::array<T, N>> : std::true_type {
  using elem = T;
  static constexpr std::size_t len = N;
};
template <class T, std::size_t N>
struct array_info<T[N]> : std::true_type {
  using elem = T;
  static constexpr std::size_t len = N;
};

template <class T>
struct fixed_str_info : std::false_type {};
template <std::size_t N>
struct fixed_str_info<FixedStr<N>> : std::true_type {
  static constexpr std::size_t size = N;
};

template <class T>
struct opaque_info : std::false_type {};
template <std::size_t Size, std::size_t Align, std::uint64_t Hash>
struct opaque_info<Opaque<Size, Align, Hash>> : std::true_type {
  static constexpr std::size_t size = Size;
  static constexpr std::size_t align = Align;
  static constexpr std::uint64_t hash = Hash;
};

/// Whether `struct_traits<T>` is defined (declared before this is asked).
template <class T, class = void>
struct has_struct_traits : std::false_type {};
template <class T>
struct has_struct_traits<T, std::void_t<decltype(sizeof(struct_traits<T>))>> : std::true_type {};

/// The Rust primitive of an arithmetic (or enum) C++ type.
template <class T>
constexpr std::string_view prim_name() noexcept {
  if constexpr (std::is_enum_v<T>) {
    return prim_name<std::underlying_type_t<T>>();
  } else if constexpr (std::is_same_v<T, bool>) {
    static_assert(always_false<T>::value,
                  "nerve: bool has no Rust plain-data equivalent: use std::uint8_t (0 or 1)");
    return {};
  } else if constexpr (std::is_same_v<T, char> || std::is_same_v<T, wchar_t> ||
                       std::is_same_v<T, char16_t> || std::is_same_v<T, char32_t>) {
    static_assert(always_false<T>::value,
                  "nerve: character types are refused: use std::uint8_t or std::int8_t, or "
                  "nerve::FixedStr<N> for text");
    return {};
  } else if constexpr (std::is_same_v<T, float>) {
    static_assert(sizeof(float) == 4, "nerve: float must be IEEE binary32");
    return "f32";
  } else if constexpr (std::is_same_v<T, double>) {
    static_assert(sizeof(double) == 8, "nerve: double must be IEEE binary64");
    return "f64";
  } else if constexpr (std::is_integral_v<T>) {
    constexpr bool s = std::is_signed_v<T>;
    static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8 ||
                      sizeof(T) == 16,
                  "nerve: an integer of an unsupported size");
    switch (sizeof(T)) {
      case 1: return s ? "i8" : "u8";
      case 2: return s ? "i16" : "u16";
      case 4: return s ? "i32" : "u32";
      case 8: return s ? "i64" : "u64";
      default: return s ? "i128" : "u128";
    }
  } else {
    static_assert(always_false<T>::value,
                  "nerve: long double has no Rust plain-data equivalent");
    return {};
  }
}

inline std::string opaque_shape(std::size_t size, std::size_t align, std::uint64_t hash) {
  static const char digits[] = "0123456789abcdef";
  std::string hex(16, '0');
  for (int i = 15; i >= 0; --i, hash >>= 4) hex[static_cast<std::size_t>(i)] = digits[hash & 0xf];
  return "opaque(" + std::to_string(size) + "," + std::to_string(align) + "," + hex + ")";
}

/// The shape of `T` with every nested struct written out (in braces): equal for equal
/// layouts, as Rust compares nested structs when it names them.
template <class T>
std::string canonical_shape() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_arithmetic_v<U> || std::is_enum_v<U>) {
    return std::string(prim_name<U>());
  } else if constexpr (array_info<U>::value) {
    return "[" + canonical_shape<typename array_info<U>::elem>() + ";" +
           std::to_string(array_info<U>::len) + "]";
  } else if constexpr (fixed_str_info<U>::value) {
    return opaque_shape(sizeof(U), 1, fixed_str_hash(fixed_str_info<U>::size));
  } else if constexpr (opaque_info<U>::value) {
    return opaque_shape(opaque_info<U>::size, opaque_info<U>::align, opaque_info<U>::hash);
  } else if constexpr (has_struct_traits<U>::value) {
    std::string out = "{" + std::string(struct_traits<U>::name) + " " +
                      std::to_string(sizeof(U)) + " " + std::to_string(alignof(U));
    auto field = [&out](auto tag, std::string_view name, std::size_t offset) {
      using F = typename decltype(tag)::type;
      out += " ";
      out += name;
      out += ":" + std::to_string(offset) + ":" + canonical_shape<F>();
    };
    struct_traits<U>::visit(field);
    return out + "}";
  } else {
    static_assert(always_false<U>::value,
                  "nerve: a field type without a shape: a nested struct needs NERVE_STRUCT "
                  "(or NERVE_MESSAGE) before the struct that embeds it");
    return {};
  }
}

/// Writes a schema as Rust's `Schema::encode` does: shapes by name, each nested struct
/// once (in the order Rust writes them), a second struct of the same name as `Name~2`.
class schema_writer {
 public:
  /// The shape of `T` as a field or slice element, naming the structs it holds.
  template <class T>
  std::string shape() {
    using U = std::remove_cv_t<T>;
    if constexpr (array_info<U>::value) {
      return "[" + shape<typename array_info<U>::elem>() + ";" +
             std::to_string(array_info<U>::len) + "]";
    } else if constexpr (has_struct_traits<U>::value && !fixed_str_info<U>::value &&
                         !opaque_info<U>::value) {
      return struct_key<U>();
    } else {
      return canonical_shape<U>();
    }
  }

  /// The whole unsealed schema text.
  std::string finish(std::string_view type_name, const std::string& head,
                     const std::string& elem) const {
    std::string out = "nerve-schema/1|type=";
    out += type_name;
    out += "|hash=0000000000000000|head=" + head + "|elem=" + elem;
    for (const std::string& line : lines_) out += "|" + line;
    return out;
  }

 private:
  struct named {
    std::string canonical;
    std::string name;
    std::string key;
  };

  template <class T>
  std::string struct_key() {
    std::string canonical = canonical_shape<T>();
    for (const named& s : seen_) {
      if (s.canonical == canonical) return s.key;
    }
    std::string name(struct_traits<T>::name);
    std::size_t same = 0;
    for (const named& s : seen_) same += s.name == name ? std::size_t{1} : std::size_t{0};
    std::string key = same == 0 ? name : name + "~" + std::to_string(same + 1);
    seen_.push_back(named{canonical, name, key});
    std::string line =
        "struct " + key + " " + std::to_string(sizeof(T)) + " " + std::to_string(alignof(T));
    auto field = [this, &line](auto tag, std::string_view fname, std::size_t offset) {
      using F = typename decltype(tag)::type;
      std::string s = this->template shape<F>();
      line += " ";
      line += fname;
      line += ":" + std::to_string(offset) + ":" + s;
    };
    struct_traits<T>::visit(field);
    lines_.push_back(line);
    return key;
  }

  std::vector<named> seen_;
  std::vector<std::string> lines_;
};

}  // namespace detail

/// The unsealed schema text (hash all zeros) of message type `T`, built from its C++
/// layout: what `NERVE_MESSAGE` types return from `schema_text()`. For a generated type it
/// is its `schema_text` with the hash zeroed.
template <class T>
std::string unsealed_schema_text() {
  using traits = message_traits<T>;
  using elem = typename traits::elem_type;
  static_assert(detail::has_struct_traits<T>::value,
                "nerve: the message needs struct_traits (NERVE_MESSAGE gives it)");
  detail::schema_writer w;
  std::string head = w.shape<T>();
  std::string elem_shape;
  if constexpr (std::is_same_v<elem, no_elem>) {
    elem_shape = "-";
  } else {
    elem_shape = w.shape<elem>();
  }
  return w.finish(traits::type_name, head, elem_shape);
}

}  // namespace nerve

// Preprocessor machinery: NERVE_PP_EACH(M, T, a, b, ...) is M(T, a) M(T, b) ...
#define NERVE_PP_CAT_(a, b) a##b
#define NERVE_PP_CAT(a, b) NERVE_PP_CAT_(a, b)
#define NERVE_PP_EACH(M, T, ...) \
  NERVE_PP_CAT(NERVE_PP_EACH_, NERVE_PP_COUNT(__VA_ARGS__))(M, T, __VA_ARGS__)
#define NERVE_PP_COUNT(...)                                                               \
  NERVE_PP_COUNT_(__VA_ARGS__, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, \
                  16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define NERVE_PP_COUNT_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, \
                        _16, _17, _18, _19, _20, _21, _22, _23, _24, _25, _26, _27, _28, _29, \
                        _30, _31, _32, N, ...)                                           \
  N
#define NERVE_PP_EACH_1(M, T, a) M(T, a)
#define NERVE_PP_EACH_2(M, T, a, ...) M(T, a) NERVE_PP_EACH_1(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_3(M, T, a, ...) M(T, a) NERVE_PP_EACH_2(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_4(M, T, a, ...) M(T, a) NERVE_PP_EACH_3(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_5(M, T, a, ...) M(T, a) NERVE_PP_EACH_4(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_6(M, T, a, ...) M(T, a) NERVE_PP_EACH_5(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_7(M, T, a, ...) M(T, a) NERVE_PP_EACH_6(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_8(M, T, a, ...) M(T, a) NERVE_PP_EACH_7(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_9(M, T, a, ...) M(T, a) NERVE_PP_EACH_8(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_10(M, T, a, ...) M(T, a) NERVE_PP_EACH_9(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_11(M, T, a, ...) M(T, a) NERVE_PP_EACH_10(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_12(M, T, a, ...) M(T, a) NERVE_PP_EACH_11(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_13(M, T, a, ...) M(T, a) NERVE_PP_EACH_12(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_14(M, T, a, ...) M(T, a) NERVE_PP_EACH_13(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_15(M, T, a, ...) M(T, a) NERVE_PP_EACH_14(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_16(M, T, a, ...) M(T, a) NERVE_PP_EACH_15(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_17(M, T, a, ...) M(T, a) NERVE_PP_EACH_16(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_18(M, T, a, ...) M(T, a) NERVE_PP_EACH_17(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_19(M, T, a, ...) M(T, a) NERVE_PP_EACH_18(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_20(M, T, a, ...) M(T, a) NERVE_PP_EACH_19(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_21(M, T, a, ...) M(T, a) NERVE_PP_EACH_20(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_22(M, T, a, ...) M(T, a) NERVE_PP_EACH_21(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_23(M, T, a, ...) M(T, a) NERVE_PP_EACH_22(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_24(M, T, a, ...) M(T, a) NERVE_PP_EACH_23(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_25(M, T, a, ...) M(T, a) NERVE_PP_EACH_24(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_26(M, T, a, ...) M(T, a) NERVE_PP_EACH_25(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_27(M, T, a, ...) M(T, a) NERVE_PP_EACH_26(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_28(M, T, a, ...) M(T, a) NERVE_PP_EACH_27(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_29(M, T, a, ...) M(T, a) NERVE_PP_EACH_28(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_30(M, T, a, ...) M(T, a) NERVE_PP_EACH_29(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_31(M, T, a, ...) M(T, a) NERVE_PP_EACH_30(M, T, __VA_ARGS__)
#define NERVE_PP_EACH_32(M, T, a, ...) M(T, a) NERVE_PP_EACH_31(M, T, __VA_ARGS__)

#define NERVE_PP_VISIT_(T, f) v(::nerve::type_tag<decltype(T::f)>{}, #f, offsetof(T, f));
#define NERVE_PP_OFFSET_(T, f) offsetof(T, f),
#define NERVE_PP_SIZE_(T, f) +sizeof(T::f)

/// Declares `nerve::struct_traits<Type>` for a struct nested in hand-written messages:
/// its fields, in declaration order. At global scope, followed by a semicolon.
#define NERVE_STRUCT(Type, ...)                                                            \
  static_assert(std::is_standard_layout_v<Type>, "nerve: " #Type " must be standard-layout"); \
  static_assert(std::is_trivially_copyable_v<Type>,                                        \
                "nerve: " #Type " must be trivially copyable");                            \
  static_assert(::nerve::detail::ascending({NERVE_PP_EACH(NERVE_PP_OFFSET_, Type, __VA_ARGS__)}), \
                "nerve: list the fields of " #Type " in declaration order");               \
  static_assert(0 NERVE_PP_EACH(NERVE_PP_SIZE_, Type, __VA_ARGS__) == sizeof(Type),        \
                "nerve: " #Type " has padding or fields the macro does not list: list "   \
                "every field, and make padding an explicit (reserved) field");             \
  template <>                                                                              \
  struct nerve::struct_traits<Type> {                                                      \
    static constexpr std::string_view name = ::nerve::detail::bare_name(#Type);            \
    template <class V>                                                                     \
    static void visit(V& v) {                                                              \
      NERVE_PP_EACH(NERVE_PP_VISIT_, Type, __VA_ARGS__)                                    \
    }                                                                                      \
  };                                                                                       \
  static_assert(true)

/// Declares `Type` a message of type name `TypeName` ("pkg/Name"): its `struct_traits`
/// (NERVE_STRUCT) and its `message_traits`, unsealed (see the top of this header). At
/// global scope, followed by a semicolon.
#define NERVE_MESSAGE(Type, TypeName, ...)                                                 \
  NERVE_STRUCT(Type, __VA_ARGS__);                                                         \
  static_assert(::nerve::detail::valid_type_name(TypeName),                                \
                "nerve: a message type name is pkg/Name, printable, without | = or spaces"); \
  template <>                                                                              \
  struct nerve::message_traits<Type> {                                                     \
    using elem_type = ::nerve::no_elem;                                                    \
    static constexpr std::string_view type_name = TypeName;                                \
    static constexpr bool sealed = false;                                                  \
    static constexpr std::size_t head_size = sizeof(Type);                                 \
    static constexpr std::size_t elems_offset = sizeof(Type);                              \
    static const std::string& schema_text() {                                              \
      static const std::string text = ::nerve::unsealed_schema_text<Type>();               \
      return text;                                                                         \
    }                                                                                      \
  };                                                                                       \
  static_assert(true)
