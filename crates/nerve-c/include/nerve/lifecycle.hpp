// Managed (lifecycle) nodes for C++17: ROS 2's states and transitions over the C ABI
// (nerve_managed_*). A ManagedNode starts unconfigured; transitions run its callbacks,
// which return CallbackReturn (an exception counts as Error: error processing, then
// unconfigured or finalized). `nerve lifecycle set` and `nerve launch` drive it through
// <node>/change_state once it is added to an executor (or while handle_pending runs).
// A LifecyclePublisher<T> sends only while its managed node is active.
#pragma once

#include "../nerve.hpp"

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace nerve {

/// What a transition callback says.
enum class CallbackReturn : int {
  /// The transition reaches its goal.
  Success = NERVE_LIFECYCLE_SUCCESS,
  /// Refused: back to the state it started from.
  Failure = NERVE_LIFECYCLE_FAILURE,
  /// Broken: error processing (on_error), then unconfigured or finalized.
  Error = NERVE_LIFECYCLE_ERROR,
};

/// ROS 2's lifecycle state ids (lifecycle_msgs/State).
enum class LifecycleState : std::uint8_t {
  Unknown = 0,
  Unconfigured = 1,
  Inactive = 2,
  Active = 3,
  Finalized = 4,
  Configuring = 10,
  CleaningUp = 11,
  ShuttingDown = 12,
  Activating = 13,
  Deactivating = 14,
  ErrorProcessing = 15,
};

/// ROS 2's label of a state ("unconfigured", "active", ...).
inline const char* state_label(LifecycleState s) noexcept {
  switch (s) {
    case LifecycleState::Unconfigured: return "unconfigured";
    case LifecycleState::Inactive: return "inactive";
    case LifecycleState::Active: return "active";
    case LifecycleState::Finalized: return "finalized";
    case LifecycleState::Configuring: return "configuring";
    case LifecycleState::CleaningUp: return "cleaningup";
    case LifecycleState::ShuttingDown: return "shuttingdown";
    case LifecycleState::Activating: return "activating";
    case LifecycleState::Deactivating: return "deactivating";
    case LifecycleState::ErrorProcessing: return "errorprocessing";
    default: return "unknown";
  }
}

/// A transition callback: gets the state the transition started from.
using LifecycleCallback = std::function<CallbackReturn(LifecycleState previous)>;

/// A node with ROS 2's lifecycle (see the file comment). Move-only; its objects belong
/// to the thread of its context.
class ManagedNode {
 public:
  /// An empty object (holds nothing).
  ManagedNode() noexcept = default;
  /// Makes `node` managed (opens its lifecycle services and its transition events).
  explicit ManagedNode(const Node& node) {
    nerve_managed_t h{};
    detail::check(nerve_managed_create(node.handle(), &h));
    h_ = Handle(h);
  }

  /// Runs in configuring (from unconfigured).
  void on_configure(LifecycleCallback f) { on("configure", std::move(f)); }
  /// Runs in activating (from inactive).
  void on_activate(LifecycleCallback f) { on("activate", std::move(f)); }
  /// Runs in deactivating (from active).
  void on_deactivate(LifecycleCallback f) { on("deactivate", std::move(f)); }
  /// Runs in cleaningup (from inactive).
  void on_cleanup(LifecycleCallback f) { on("cleanup", std::move(f)); }
  /// Runs in shuttingdown (from unconfigured, inactive or active).
  void on_shutdown(LifecycleCallback f) { on("shutdown", std::move(f)); }
  /// Runs in errorprocessing (gets the transition state that erred).
  void on_error(LifecycleCallback f) { on("error", std::move(f)); }

  /// The current state.
  LifecycleState state() const {
    std::uint8_t s = 0;
    detail::check(nerve_managed_state(h_.get(), &s));
    return static_cast<LifecycleState>(s);
  }
  /// Whether the node is active (gate publishers with it): one ABI call, a handle check
  /// and an atomic load (nerve_managed_current_state); false for an empty object.
  bool is_active() const noexcept {
    return nerve_managed_current_state(h_.get()) == static_cast<std::uint8_t>(LifecycleState::Active);
  }

  /// Runs the transition `label` ("configure", "activate", "deactivate", "cleanup",
  /// "shutdown") now; returns the state reached. Throws nerve::Error: refused
  /// (NERVE_ERR_INVALID_ARGUMENT, NERVE_ERR_BUSY) or its callback failed or threw
  /// (NERVE_ERR_CALLBACK; the message names where the node ended up).
  LifecycleState trigger(std::string_view label) {
    std::uint8_t s = 0;
    detail::check(nerve_managed_trigger(h_.get(), detail::c_string(label).c_str(), &s));
    return static_cast<LifecycleState>(s);
  }

  /// Answers the lifecycle requests waiting now (when not on an executor).
  std::size_t handle_pending() {
    std::size_t n = 0;
    detail::check(nerve_managed_handle_pending(h_.get(), &n));
    return n;
  }

  /// Serves the node's lifecycle services on `exec` from now on.
  void add_to(Executor& exec) { detail::check(nerve_executor_add_managed(exec.handle(), h_.get())); }

  /// The C handle (still owned by this object).
  nerve_managed_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a managed node.
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  using Handle = detail::Owner<nerve_managed_t, &nerve_managed_destroy>;

  static int trampoline(void* user, std::uint8_t previous) noexcept {
    auto* f = static_cast<LifecycleCallback*>(user);
    try {
      return static_cast<int>((*f)(static_cast<LifecycleState>(previous)));
    } catch (...) {
      // no exception crosses the C ABI: a throwing callback is an error, and its message
      // reaches the transition's error (trigger's nerve::Error)
      detail::record_exception(nullptr);
      return NERVE_LIFECYCLE_ERROR;
    }
  }
  static void drop(void* user) noexcept { delete static_cast<LifecycleCallback*>(user); }

  void on(const char* hook, LifecycleCallback f) {
    auto* boxed = new LifecycleCallback(std::move(f));
    // the library owns `boxed` from here (drop frees it, also when the call fails)
    detail::check(nerve_managed_on(h_.get(), hook, &trampoline, boxed, &drop));
  }

  Handle h_;
};

/// A publisher gated by a managed node's state: while the node is not active every
/// publish, loan and send is dropped and counted (dropped()). The gate costs one ABI call
/// per publish (nerve_managed_current_state: a handle check and an atomic load). It
/// refers to the ManagedNode's handle, not owning it: once that node is destroyed the
/// gate stays shut. Move-only; it belongs to the thread of its context, like both.
template <class T>
class LifecyclePublisher {
 public:
  /// The slice element type (nerve::no_elem when there is none).
  using elem_type = typename Publisher<T>::elem_type;

  /// An empty publisher (holds nothing; its gate is shut).
  LifecyclePublisher() noexcept = default;
  /// Gates `publisher` by `managed`'s state.
  LifecyclePublisher(const ManagedNode& managed, Publisher<T> publisher) noexcept
      : managed_(managed.handle()), pub_(std::move(publisher)) {}
  /// A publisher of T on `topic` of `node` (the managed node's node), gated by `managed`.
  LifecyclePublisher(const ManagedNode& managed, const Node& node, std::string_view topic,
                     const Qos& qos = Qos())
      : managed_(managed.handle()), pub_(node, topic, qos) {}

  /// Whether samples go out now (the node is active).
  bool is_active() const noexcept {
    return nerve_managed_current_state(managed_) == static_cast<std::uint8_t>(LifecycleState::Active);
  }

  /// Copies `msg` into a new sample and sends it if the node is active: true when sent,
  /// false when dropped. Throws nerve::Error as Publisher::publish.
  bool publish(const T& msg) {
    if (!gate()) return false;
    pub_.publish(msg);
    return true;
  }
  /// Copies `head` and `elems` into a new sample and sends it if the node is active.
  template <class E = elem_type>
  bool publish(const T& head, span<const detail::type_identity_t<E>> elems) {
    if (!gate()) return false;
    pub_.template publish<E>(head, elems);
    return true;
  }
  /// publish without throwing: true sent, false dropped, or the error.
  Result<bool> try_publish(const T& msg) noexcept {
    if (!gate()) return Result<bool>(false);
    Result<void> r = pub_.try_publish(msg);
    if (!r.ok()) return detail::ResultAccess::error<Result<bool>>(r.code(), r.error_message());
    return Result<bool>(true);
  }

  /// A loan of `n_elems` slice elements while the node is active; none (and a drop
  /// counted) otherwise.
  std::optional<Loan<T>> loan(std::size_t n_elems = 0) {
    if (!gate()) return std::nullopt;
    return pub_.loan(n_elems);
  }
  /// Sends a loan of this publisher if the node is still active; otherwise discards it
  /// and counts a drop. True when sent.
  bool send(Loan<T>&& loan) {
    if (!gate()) {
      Loan<T> discarded(std::move(loan));
      return false;
    }
    pub_.send(std::move(loan));
    return true;
  }

  /// Samples dropped because the node was not active.
  std::uint64_t dropped() const noexcept { return dropped_; }
  /// The publisher itself (ungated).
  Publisher<T>& publisher() noexcept { return pub_; }
  /// Whether this object holds a publisher.
  explicit operator bool() const noexcept { return static_cast<bool>(pub_); }

 private:
  bool gate() noexcept {
    const bool open = is_active();
    if (!open) ++dropped_;
    return open;
  }

  nerve_managed_t managed_{};
  Publisher<T> pub_;
  std::uint64_t dropped_ = 0;
};

}  // namespace nerve
