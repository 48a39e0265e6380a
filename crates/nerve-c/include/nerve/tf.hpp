// Nerve C++ API: transforms (nerve-tf). A Buffer shared by threads (lookups from any
// thread, lock-free; copies share one buffer), a Listener thread feeding it from /tf and
// /tf_static, and broadcasters. Errors throw nerve::Error naming the frames and times.
#pragma once

#include <nerve.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nerve::tf {

/// The time of a lookup that means "the newest time the whole chain has".
inline constexpr std::int64_t LATEST = NERVE_TF_LATEST;
/// LATEST as a nerve::Time.
inline constexpr Time LATEST_TIME = Clock::from_ns(NERVE_TF_LATEST);

/// A rigid transform: p_parent = rotation * p_child + translation (rotation x, y, z, w).
struct Transform {
  std::array<double, 3> translation{0.0, 0.0, 0.0};
  std::array<double, 4> rotation{0.0, 0.0, 0.0, 1.0};

  /// A point of the child (source) frame in the parent (target) frame.
  std::array<double, 3> apply(const std::array<double, 3>& p) const noexcept {
    const auto [x, y, z, w] = rotation;
    // v + 2w (u x v) + 2 u x (u x v), u = (x, y, z)
    const double tx = 2 * (y * p[2] - z * p[1]);
    const double ty = 2 * (z * p[0] - x * p[2]);
    const double tz = 2 * (x * p[1] - y * p[0]);
    return {p[0] + w * tx + (y * tz - z * ty) + translation[0],
            p[1] + w * ty + (z * tx - x * tz) + translation[1],
            p[2] + w * tz + (x * ty - y * tx) + translation[2]};
  }
  /// Moves points (x, y, z each) of the child frame into the parent frame, in place.
  void apply_in_place(std::vector<std::array<double, 3>>& points) const noexcept {
    for (auto& p : points) p = apply(p);
  }
};

/// One transform to broadcast: `child` in `parent` at `stamp_ns` (robot time, ns).
struct Stamped {
  std::string parent;
  std::string child;
  std::int64_t stamp_ns = 0;
  Transform transform;

  /// The stamp as a nerve::Time.
  Time stamp() const noexcept { return Clock::from_ns(stamp_ns); }
  /// Sets the stamp from a nerve::Time (e.g. node.now()).
  void set_stamp(Time t) noexcept { stamp_ns = Clock::to_ns(t); }
};

namespace detail {
inline nerve_tf_transform_t to_c(const Transform& t) noexcept {
  nerve_tf_transform_t c{};
  for (std::size_t i = 0; i < 3; ++i) c.translation[i] = t.translation[i];
  for (std::size_t i = 0; i < 4; ++i) c.rotation[i] = t.rotation[i];
  return c;
}
inline Transform from_c(const nerve_tf_transform_t& c) noexcept {
  Transform t;
  for (std::size_t i = 0; i < 3; ++i) t.translation[i] = c.translation[i];
  for (std::size_t i = 0; i < 4; ++i) t.rotation[i] = c.rotation[i];
  return t;
}
}  // namespace detail

/// Frames and their recent history, shared by threads: copies share the buffer.
class Buffer {
 public:
  /// A buffer keeping `window` of history per frame, at most `max_history` transforms
  /// per frame and `max_frames` frames.
  explicit Buffer(std::chrono::nanoseconds window = std::chrono::seconds(10),
                  std::uint32_t max_frames = 10000, std::uint32_t max_history = 10000) {
    nerve::detail::check(nerve_tf_buffer_create(window.count(), max_frames, max_history, &p_));
  }
  Buffer(const Buffer& o) { nerve::detail::check(nerve_tf_buffer_retain(o.p_, &p_)); }
  Buffer(Buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Buffer& operator=(Buffer o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~Buffer() { nerve_tf_buffer_release(p_); }

  /// Stores `child` in `parent` at `stamp_ns`; false when older than the window. Throws
  /// for a non-unit or NaN rotation, a second parent, a loop or a frame past the limit.
  bool set_transform(std::string_view parent, std::string_view child, std::int64_t stamp_ns,
                     const Transform& t, bool is_static = false) {
    const auto c = detail::to_c(t);
    return nerve::detail::check(nerve_tf_buffer_set(p_, nerve::detail::c_string(parent).c_str(),
                                                    nerve::detail::c_string(child).c_str(),
                                                    stamp_ns, &c, is_static));
  }
  /// Stores `child` in `parent` at the robot time `stamp`.
  bool set_transform(std::string_view parent, std::string_view child, Time stamp, const Transform& t,
                     bool is_static = false) {
    return set_transform(parent, child, Clock::to_ns(stamp), t, is_static);
  }
  /// `source` in `target` at the robot time `time` (LATEST_TIME: newest).
  Transform lookup_transform(std::string_view target, std::string_view source, Time time) const {
    return lookup_transform(target, source, Clock::to_ns(time));
  }
  /// Whether the lookup at the robot time `time` would succeed now.
  bool can_transform(std::string_view target, std::string_view source, Time time) const {
    return can_transform(target, source, Clock::to_ns(time));
  }
  /// The lookup at the robot time `time`, waiting up to `timeout` (nerve::Timeout).
  template <class Rep, class Period>
  Transform wait_for_transform(std::string_view target, std::string_view source, Time time,
                               std::chrono::duration<Rep, Period> timeout) const {
    return wait_for_transform(target, source, Clock::to_ns(time),
                              std::chrono::nanoseconds(nerve::detail::saturate_ns(timeout)));
  }
  /// `source` in `target` at `time_ns` (LATEST: newest); throws naming frames and times.
  Transform lookup_transform(std::string_view target, std::string_view source,
                             std::int64_t time_ns = LATEST) const {
    nerve_tf_transform_t out{};
    nerve::detail::check(nerve_tf_buffer_lookup(p_, nerve::detail::c_string(target).c_str(),
                                                nerve::detail::c_string(source).c_str(), time_ns,
                                                &out));
    return detail::from_c(out);
  }
  /// Whether the lookup would succeed now.
  bool can_transform(std::string_view target, std::string_view source,
                     std::int64_t time_ns = LATEST) const {
    bool can = false;
    nerve::detail::check(nerve_tf_buffer_can_transform(
        p_, nerve::detail::c_string(target).c_str(), nerve::detail::c_string(source).c_str(),
        time_ns, &can));
    return can;
  }
  /// The lookup, waiting up to `timeout`; throws nerve::Timeout (NERVE_ERR_TIMEOUT) with the
  /// lookup's error.
  Transform wait_for_transform(std::string_view target, std::string_view source,
                               std::int64_t time_ns, std::chrono::nanoseconds timeout) const {
    nerve_tf_transform_t out{};
    nerve::detail::check(nerve_tf_buffer_wait(p_, nerve::detail::c_string(target).c_str(),
                                              nerve::detail::c_string(source).c_str(), time_ns,
                                              timeout.count(), &out));
    return detail::from_c(out);
  }
  /// The C pointer (still owned by this object).
  const nerve_tf_buffer_t* get() const noexcept { return p_; }

 private:
  nerve_tf_buffer_t* p_ = nullptr;
};

/// A thread feeding a Buffer from /tf and /tf_static (stopped and joined when destroyed).
class Listener {
 public:
  /// Starts it with a node `name` of `ctx`, feeding `buffer` (shared with the caller).
  Listener(const Context& ctx, std::string_view name, Buffer buffer = Buffer())
      : buffer_(std::move(buffer)) {
    nerve_tf_listener_t h{};
    nerve::detail::check(nerve_tf_listener_create(
        ctx.handle(), nerve::detail::c_string(name).c_str(), buffer_.get(), &h));
    h_ = Handle(h);
  }
  /// The buffer it feeds.
  const Buffer& buffer() const noexcept { return buffer_; }

 private:
  using Handle = nerve::detail::Owner<nerve_tf_listener_t, &nerve_tf_listener_destroy>;
  Buffer buffer_;
  Handle h_;
};

/// Publishes transforms on /tf, or with `is_static` on /tf_static (latched: every send
/// carries all static transforms given so far).
class Broadcaster {
 public:
  explicit Broadcaster(const Node& node, bool is_static = false) {
    nerve_tf_broadcaster_t h{};
    nerve::detail::check(nerve_tf_broadcaster_create(node.handle(), is_static, &h));
    h_ = Handle(h);
  }
  /// Sends the transforms in one message.
  void send(const std::vector<Stamped>& items) {
    std::vector<nerve_tf_stamped_t> c;
    c.reserve(items.size());
    for (const auto& i : items) {
      c.push_back(nerve_tf_stamped_t{i.parent.c_str(), i.child.c_str(), i.stamp_ns,
                                     detail::to_c(i.transform)});
    }
    nerve::detail::check(nerve_tf_broadcaster_send(h_.get(), c.data(), c.size()));
  }

 private:
  using Handle = nerve::detail::Owner<nerve_tf_broadcaster_t, &nerve_tf_broadcaster_destroy>;
  Handle h_;
};

/// A Broadcaster on /tf_static.
class StaticBroadcaster : public Broadcaster {
 public:
  explicit StaticBroadcaster(const Node& node) : Broadcaster(node, true) {}
};

}  // namespace nerve::tf
