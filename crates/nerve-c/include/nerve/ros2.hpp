// Nerve C++ API: topics and actions of ROS 2 types, with the classes `nerve types gen-cpp`
// generates from `.msg/.srv/.action` (CDR-backed, as rosidl's C++ structs read).
//
//     #include <nerve.hpp>
//     #include <nerve/ros2.hpp>
//     #include <test_msgs/msg/unbounded_sequences.hpp>   // nerve types gen-cpp test_msgs/msg/UnboundedSequences
//
//     nerve::Publisher<test_msgs::msg::UnboundedSequences> pub(node, "/seqs");
//     test_msgs::msg::UnboundedSequences m;
//     m.int32_values = {1, -2, 3};
//     pub.publish(m);                      // CDR on a nerve_msgs/Ros2Cdr topic
//
//     nerve::ActionServer<test_msgs::action::NestedMessage> server(node, "/nested");
//     server.spin_once(std::chrono::milliseconds(10));
//     if (auto g = server.take_goal()) { g->send_feedback(fb); g->succeed(result); }
//
// A generated header specializes nerve::Publisher, nerve::Subscriber (messages) and
// nerve::ActionServer, nerve::ActionClient (actions) of its types as the nerve::ros2 classes
// below, so both spellings name the same class (node.publisher<T>() too). The executor does
// not take them (use take()/spin_once() loops).
//
// How a ROS 2 type travels in Nerve is decided once, in Rust (`nerve_ros2_map`), and these
// classes are doors to it:
// - a topic of ROS 2 message type T is a `nerve_msgs/Ros2Cdr` topic whose schema names T,
//   its RIHS01 hash and its definition (`nerve_ros2_schema`); the ROS 2 bridge carries it
//   to and from ROS 2 as T, `nerve topic echo` decodes it;
// - an action of ROS 2 action type A is a `nerve_msgs/Ros2Action` action whose server says
//   A on `<action>/_action/ros2_type` (`nerve_ros2_action_server_create`), so the bridge
//   offers it to ROS 2 action clients as A.
// The header's type name, hash and definition are computed by `nerve types gen-cpp`; a
// definition that no longer hashes to the header's hash is NERVE_ERR_TYPE_MISMATCH.
// Messages are written and read by the generated code (nerve/cdr.hpp); a message that
// does not fit its type (a bound exceeded, text that is not UTF-8) throws
// nerve::cdr::Error naming the field, and so does a received one that does not decode.
#pragma once

#include <nerve.hpp>
#include <nerve/cdr.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nerve::ros2 {

/// Bytes of the `nerve_msgs/Ros2Cdr` head (the source stamp) before the CDR.
inline constexpr std::size_t cdr_head = 8;

/// The `nerve-schema/1` text of the Nerve topics of ROS 2 message type T.
template <class T>
std::string schema_of() {
  using Tr = cdr::message_traits<T>;
  const std::string name(Tr::type_name), hash(Tr::type_hash), def(Tr::definition);
  return nerve::detail::read_string([&](char* b, std::size_t c, std::size_t* n) {
    return nerve_ros2_schema(name.c_str(), hash.c_str(), def.c_str(), b, c, n);
  });
}

/// A publisher of ROS 2 message type T (a class `nerve types gen-cpp` generated) on a
/// Nerve topic, which the ROS 2 bridge carries to ROS 2 as T.
template <class T>
class Publisher {
 public:
  /// An empty publisher (holds nothing).
  Publisher() noexcept = default;
  /// Creates a publisher of T on `topic` (resolved as nerve::Publisher's).
  Publisher(const Node& node, std::string_view topic, const Qos& qos = Qos()) {
    const std::string schema = schema_of<T>(), t(topic);
    const nerve_qos_t q = qos.to_c();
    nerve_publisher_t h{};
    nerve::detail::check(nerve_publisher_create(node.handle(), t.c_str(), schema.c_str(), 0, &q, &h));
    h_ = Handle(h);
  }
  /// Publishes `m` (its CDR, written by its generated code; the source stamp unknown).
  void publish(const T& m) {
    buf_.assign(cdr_head, 0);
    cdr::serialize_into(m, buf_);
    nerve::detail::check(nerve_publisher_publish(h_.get(), buf_.data(), buf_.size()));
  }
  /// Waits up to `timeout` until at least `n` subscribers are connected; whether they are.
  template <class Rep, class Period>
  bool wait_for_subscribers(std::size_t n, std::chrono::duration<Rep, Period> timeout) {
    return nerve::detail::check(
        nerve_publisher_wait_for_subscribers(h_.get(), n, nerve::detail::timeout_u64(timeout)));
  }
  /// The resolved topic name.
  std::string topic_name() const {
    return nerve::detail::read_string([&](char* b, std::size_t c, std::size_t* n) {
      return nerve_publisher_topic_name(h_.get(), b, c, n);
    });
  }
  /// The C handle (still owned by this object).
  nerve_publisher_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a publisher (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  using Handle = nerve::detail::Owner<nerve_publisher_t, &nerve_publisher_destroy>;
  Handle h_;
  std::vector<std::uint8_t> buf_;
};

/// A subscriber of ROS 2 message type T on a Nerve topic (published by a Publisher<T>, a
/// Python or Rust node, or the ROS 2 bridge from ROS 2).
template <class T>
class Subscriber {
 public:
  /// An empty subscriber (holds nothing).
  Subscriber() noexcept = default;
  /// Creates a subscriber of T on `topic`.
  Subscriber(const Node& node, std::string_view topic, const Qos& qos = Qos()) {
    const std::string schema = schema_of<T>(), t(topic);
    const nerve_qos_t q = qos.to_c();
    nerve_subscriber_t h{};
    nerve::detail::check(nerve_subscriber_create(node.handle(), t.c_str(), schema.c_str(), 0, &q, &h));
    h_ = Handle(h);
  }
  /// The next message: waits up to `timeout` (zero: only what is queued, nerve::forever:
  /// until one comes); nothing when none came. A message that does not decode as T
  /// throws nerve::cdr::Error.
  template <class Rep, class Period>
  std::optional<T> take(std::chrono::duration<Rep, Period> timeout) {
    nerve_sample_t s{};
    nerve_sample_view_t v{};
    if (!nerve::detail::check(nerve_subscriber_take(h_.get(), nerve::detail::timeout_i64(timeout), &s, &v))) {
      return std::nullopt;
    }
    struct Release {
      nerve_sample_t s;
      ~Release() { (void)nerve_sample_release(s); }
    } release{s};
    const auto* data = static_cast<const std::uint8_t*>(v.data);
    if (v.len < cdr_head) {
      throw cdr::Error(std::string(cdr::message_traits<T>::type_name) + ": a sample of " +
                       std::to_string(v.len) + " bytes, shorter than its 8-byte head");
    }
    return cdr::deserialize<T>(data + cdr_head, v.len - cdr_head);
  }
  /// Publishers connected now.
  std::size_t publisher_count() const {
    std::size_t n = 0;
    nerve::detail::check(nerve_subscriber_publisher_count(h_.get(), &n));
    return n;
  }
  /// The C handle (still owned by this object).
  nerve_subscriber_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a subscriber (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  using Handle = nerve::detail::Owner<nerve_subscriber_t, &nerve_subscriber_destroy>;
  Handle h_;
};

namespace detail {

/// Copies out a payload the C ABI writes with `f(buf, cap, &len)`, growing once.
template <class F>
std::vector<std::uint8_t> read_payload(F f, nerve_status_t* status) {
  std::vector<std::uint8_t> buf(4096);
  std::size_t len = 0;
  nerve_status_t s = f(buf.data(), buf.size(), &len);
  if (s == NERVE_ERR_BUFFER_TOO_SMALL) {
    buf.assign(len, 0);
    s = f(buf.data(), buf.size(), &len);
  }
  *status = s;
  if (s == NERVE_OK) buf.resize(len);
  return buf;
}

template <class A, class F>
struct Ros2GoalDecider {
  using G = typename cdr::action_traits<A>::Goal;
  F* f;
  static std::int32_t call(void* user, const void* goal, std::size_t len) noexcept {
    auto* self = static_cast<Ros2GoalDecider*>(user);
    try {
      const G g = cdr::deserialize<G>(static_cast<const std::uint8_t*>(goal), len);
      bool accept = true;
      if constexpr (std::is_invocable_r_v<bool, F&, const G&>) {
        accept = (*self->f)(g);
      } else {
        (*self->f)(g);
      }
      if (accept) return 0;
      nerve_callback_fail("the server rejected the goal");
      return 1;
    } catch (const std::exception& e) {
      nerve_callback_fail(e.what());
      return 1;
    } catch (...) {
      nerve_callback_fail("the goal callback threw");
      return 1;
    }
  }
};

}  // namespace detail

/// A goal accepted by an ActionServer<A>: its goal message, feedback, and its end.
template <class A>
class ServerGoal {
 public:
  /// The goal message type.
  using Goal = typename cdr::action_traits<A>::Goal;
  /// The feedback message type.
  using Feedback = typename cdr::action_traits<A>::Feedback;
  /// The result message type.
  using Result = typename cdr::action_traits<A>::Result;

  /// Takes over a server-goal handle and reads its goal.
  explicit ServerGoal(nerve_server_goal_t h) : h_(h) {
    nerve_status_t s = NERVE_OK;
    const auto bytes = detail::read_payload(
        [&](std::uint8_t* b, std::size_t c, std::size_t* n) { return nerve_server_goal_data(h, b, c, n); }, &s);
    if (nerve::detail::is_error(s)) nerve::detail::throw_status(s);
    goal_ = cdr::deserialize<Goal>(bytes.data(), bytes.size());
  }
  /// The goal.
  const Goal& goal() const noexcept { return goal_; }
  /// The goal's fields.
  const Goal* operator->() const noexcept { return &goal_; }
  /// The goal's id (a UUID's text).
  std::string id() const {
    return nerve::detail::read_string(
        [&](char* b, std::size_t c, std::size_t* n) { return nerve_server_goal_id(h_.get(), b, c, n); });
  }
  /// Whether the client asked to cancel the goal.
  bool is_canceling() const {
    bool c = false;
    nerve::detail::check(nerve_server_goal_is_canceling(h_.get(), &c));
    return c;
  }
  /// Sends feedback.
  void send_feedback(const Feedback& f) {
    const auto b = cdr::serialize(f);
    nerve::detail::check(nerve_server_goal_feedback(h_.get(), b.data(), b.size()));
  }
  /// Ends the goal: succeeded, with `result`.
  void succeed(const Result& result) { end(NERVE_GOAL_SUCCEEDED, result); }
  /// Ends the goal: aborted by the server.
  void abort(const Result& result) { end(NERVE_GOAL_ABORTED, result); }
  /// Ends the goal: canceled (after is_canceling()).
  void canceled(const Result& result) { end(NERVE_GOAL_CANCELED, result); }
  /// Ends the goal in `state` (succeeded, aborted or canceled) with `result`.
  void end(GoalState state, const Result& result) {
    const auto b = cdr::serialize(result);
    nerve::detail::check(nerve_server_goal_end(h_.get(), static_cast<std::int32_t>(state), b.data(), b.size()));
  }
  /// The C handle (still owned by this object).
  nerve_server_goal_t handle() const noexcept { return h_.get(); }

 private:
  using Handle = nerve::detail::Owner<nerve_server_goal_t, &nerve_server_goal_destroy>;
  Handle h_;
  Goal goal_;
};

/// The server of ROS 2 action type A (a tag `nerve types gen-cpp` generated from a
/// `.action`): a `nerve_msgs/Ros2Action` server that says A, which the ROS 2 bridge
/// offers to ROS 2 action clients as A. spin_once() handles goal, cancel and result
/// requests; take_goal() hands out the accepted goals.
template <class A>
class ActionServer {
 public:
  /// The goal message type.
  using Goal = typename cdr::action_traits<A>::Goal;

  /// An empty server (holds nothing).
  ActionServer() noexcept = default;
  /// Creates the server of action `name` with a goal policy (as nerve::ActionServer's).
  ActionServer(const Node& node, std::string_view name, GoalPolicy policy = NERVE_GOAL_REJECT_NEW,
               std::size_t max = 1) {
    using Tr = cdr::action_traits<A>;
    const std::string n(name), t(Tr::type_name), hash(Tr::type_hash), def(Tr::definition);
    nerve_action_server_t h{};
    nerve::detail::check(nerve_ros2_action_server_create(node.handle(), n.c_str(), t.c_str(), hash.c_str(),
                                                         def.c_str(), static_cast<std::int32_t>(policy), max,
                                                         &h));
    h_ = Handle(h);
  }
  /// Waits up to `timeout` for requests and handles them, accepting every new goal (the
  /// policy permitting); the requests handled.
  template <class Rep, class Period>
  std::size_t spin_once(std::chrono::duration<Rep, Period> timeout) {
    std::size_t n = 0;
    nerve::detail::check(
        nerve_action_server_spin_once(h_.get(), nerve::detail::timeout_u64(timeout), nullptr, nullptr, &n));
    return n;
  }
  /// As spin_once(timeout), deciding on each new goal with `on_goal(const Goal&)`: it
  /// returns bool (false rejects), or nothing and throws to reject (the exception's
  /// message is the client's reason).
  template <class Rep, class Period, class F>
  std::size_t spin_once(std::chrono::duration<Rep, Period> timeout, F&& on_goal) {
    using D = detail::Ros2GoalDecider<A, std::remove_reference_t<F>>;
    D d{&on_goal};
    std::size_t n = 0;
    nerve::detail::check(
        nerve_action_server_spin_once(h_.get(), nerve::detail::timeout_u64(timeout), &D::call, &d, &n));
    return n;
  }
  /// The next accepted goal, if any.
  std::optional<ServerGoal<A>> take_goal() {
    nerve_server_goal_t g{};
    if (!nerve::detail::check(nerve_action_server_take_goal(h_.get(), &g))) return std::nullopt;
    return std::optional<ServerGoal<A>>(std::in_place, g);
  }
  /// The C handle (still owned by this object).
  nerve_action_server_t handle() const noexcept { return h_.get(); }
  /// Whether this object holds a server (false once moved from).
  explicit operator bool() const noexcept { return h_.valid(); }

 private:
  using Handle = nerve::detail::Owner<nerve_action_server_t, &nerve_action_server_destroy>;
  Handle h_;
};

/// The final state and result of a goal of A.
template <class A>
struct GoalResult {
  /// Succeeded, aborted or canceled.
  GoalState state;
  /// The result.
  typename cdr::action_traits<A>::Result result;
};

/// A goal sent by an ActionClient<A>.
template <class A>
class Goal {
 public:
  /// The feedback message type.
  using Feedback = typename cdr::action_traits<A>::Feedback;
  /// The result message type.
  using Result = typename cdr::action_traits<A>::Result;

  /// Takes over a goal handle.
  explicit Goal(nerve_goal_t h) noexcept : h_(h) {}
  /// The goal's id (a UUID's text).
  std::string id() const {
    return nerve::detail::read_string(
        [&](char* b, std::size_t c, std::size_t* n) { return nerve_goal_id(h_.get(), b, c, n); });
  }
  /// The next feedback that arrived, if any.
  std::optional<Feedback> try_feedback() {
    nerve_status_t s = NERVE_OK;
    const auto b = detail::read_payload(
        [&](std::uint8_t* d, std::size_t c, std::size_t* n) { return nerve_goal_try_feedback(h_.get(), d, c, n); },
        &s);
    if (!nerve::detail::check(s)) return std::nullopt;
    return cdr::deserialize<Feedback>(b.data(), b.size());
  }
  /// Waits up to `timeout` (nerve::forever: until it ends) for the result.
  template <class Rep, class Period>
  std::optional<GoalResult<A>> result(std::chrono::duration<Rep, Period> timeout) {
    nerve_goal_state_t st = NERVE_GOAL_ACCEPTED;
    nerve_status_t s = NERVE_OK;
    const std::int64_t t = nerve::detail::timeout_i64(timeout);
    const auto b = detail::read_payload(
        [&](std::uint8_t* d, std::size_t c, std::size_t* n) { return nerve_goal_result(h_.get(), t, &st, d, c, n); },
        &s);
    if (!nerve::detail::check(s)) return std::nullopt;
    return GoalResult<A>{st, cdr::deserialize<Result>(b.data(), b.size())};
  }
  /// Asks the server to cancel the goal; its state after the request.
  GoalState cancel() {
    nerve_goal_state_t st = NERVE_GOAL_ACCEPTED;
    nerve::detail::check(nerve_goal_cancel(h_.get(), &st));
    return st;
  }

 private:
  using Handle = nerve::detail::Owner<nerve_goal_t, &nerve_goal_destroy>;
  Handle h_;
};

/// A client of an action of ROS 2 action type A (a Nerve server of A, or a ROS 2 one
/// through the bridge).
template <class A>
class ActionClient {
 public:
  /// The goal message type.
  using GoalMsg = typename cdr::action_traits<A>::Goal;

  /// An empty client (holds nothing).
  ActionClient() noexcept = default;
  /// Creates a client of action `name`.
  ActionClient(const Node& node, std::string_view name) {
    using Tr = cdr::action_traits<A>;
    const std::string n(name), t(Tr::type_name), hash(Tr::type_hash), def(Tr::definition);
    nerve_action_client_t h{};
    nerve::detail::check(
        nerve_ros2_action_client_create(node.handle(), n.c_str(), t.c_str(), hash.c_str(), def.c_str(), &h));
    h_ = Handle(h);
  }
  /// Waits up to `timeout` for the server; whether it is there.
  template <class Rep, class Period>
  bool wait_for_server(std::chrono::duration<Rep, Period> timeout) {
    return nerve::detail::check(
        nerve_action_client_wait_for_server(h_.get(), nerve::detail::timeout_u64(timeout)));
  }
  /// Sends a goal and waits for the server to accept it; a rejection throws nerve::Error
  /// (NERVE_ERR_ACTION) with the server's reason.
  Goal<A> send_goal(const GoalMsg& goal) {
    const auto b = cdr::serialize(goal);
    nerve_goal_t g{};
    nerve::detail::check(nerve_action_client_send_goal(h_.get(), b.data(), b.size(), &g));
    return Goal<A>(g);
  }
  /// The C handle (still owned by this object).
  nerve_action_client_t handle() const noexcept { return h_.get(); }

 private:
  using Handle = nerve::detail::Owner<nerve_action_client_t, &nerve_action_client_destroy>;
  Handle h_;
};

namespace detail {

/// The service type of ROS 2 service S: its name and the carrier schemas of its messages.
template <class S>
struct ServiceType {
  std::string name{cdr::service_traits<S>::type_name};
  std::string request = schema_of<typename cdr::service_traits<S>::Request>();
  std::string response = schema_of<typename cdr::service_traits<S>::Response>();
  nerve_service_type_t c() const noexcept {
    nerve_service_type_t t{};
    t.type_name = name.c_str();
    t.request_schema = request.c_str();
    t.response_schema = response.c_str();
    return t;
  }
};

/// The `nerve_msgs/Ros2Cdr` payload of `m`: the source stamp (unknown), then its CDR.
template <class T>
void payload(const T& m, std::vector<std::uint8_t>& buf) {
  buf.assign(cdr_head, 0);
  cdr::serialize_into(m, buf);
}

/// The message of a `nerve_msgs/Ros2Cdr` payload.
template <class T>
T from_payload(const nerve_sample_view_t& v) {
  if (v.len < cdr_head) {
    throw cdr::Error(std::string(cdr::message_traits<T>::type_name) + ": a payload of " + std::to_string(v.len) +
                     " bytes, shorter than its 8-byte head");
  }
  return cdr::deserialize<T>(static_cast<const std::uint8_t*>(v.data) + cdr_head, v.len - cdr_head);
}

}  // namespace detail

/// The server of a service of ROS 2 service type S (a tag `nerve types gen-cpp` generated
/// from a `.srv`): a Nerve service of type `pkg/srv/Name` whose request and response are
/// carried as CDR, which the ROS 2 bridge offers to ROS 2 clients as S.
template <class S>
class Server {
 public:
  /// The request message type.
  using Request = typename cdr::service_traits<S>::Request;
  /// The response message type.
  using Response = typename cdr::service_traits<S>::Response;

  /// An empty server (holds nothing).
  Server() noexcept = default;
  /// Creates the server of service `name`.
  Server(const Node& node, std::string_view name) {
    const detail::ServiceType<S> t;
    const nerve_service_type_t c = t.c();
    const std::string n(name);
    nerve_server_t h{};
    nerve::detail::check(nerve_server_create(node.handle(), n.c_str(), &c, &h));
    h_ = Handle(h);
  }
  /// Waits up to `timeout` for a request and answers it with `handler(const Request&)`,
  /// which returns the Response (an exception fails the call, the caller getting its
  /// message); whether a request was answered.
  template <class Rep, class Period, class F>
  bool serve_once(std::chrono::duration<Rep, Period> timeout, F&& handler) {
    nerve_request_t rq{};
    nerve_sample_view_t v{};
    if (!nerve::detail::check(nerve_server_take(h_.get(), nerve::detail::timeout_i64(timeout), &rq, &v))) return false;
    try {
      const Request req = detail::from_payload<Request>(v);
      const Response resp = handler(req);
      detail::payload(resp, buf_);
    } catch (const std::exception& e) {
      nerve::detail::check(nerve_request_fail(rq, e.what()));
      return true;
    }
    nerve::detail::check(nerve_request_reply(rq, buf_.data(), buf_.size()));
    return true;
  }
  /// The C handle (still owned by this object).
  nerve_server_t handle() const noexcept { return h_.get(); }

 private:
  using Handle = nerve::detail::Owner<nerve_server_t, &nerve_server_destroy>;
  Handle h_;
  std::vector<std::uint8_t> buf_;
};

/// A client of a service of ROS 2 service type S (a Nerve server of S, or a ROS 2 one
/// through the bridge).
template <class S>
class Client {
 public:
  /// The request message type.
  using Request = typename cdr::service_traits<S>::Request;
  /// The response message type.
  using Response = typename cdr::service_traits<S>::Response;

  /// An empty client (holds nothing).
  Client() noexcept = default;
  /// Creates a client of service `name`.
  Client(const Node& node, std::string_view name) {
    const detail::ServiceType<S> t;
    const nerve_service_type_t c = t.c();
    const std::string n(name);
    nerve_client_t h{};
    nerve::detail::check(nerve_client_create(node.handle(), n.c_str(), &c, &h));
    h_ = Handle(h);
  }
  /// Waits up to `timeout` for the service; whether it is there.
  template <class Rep, class Period>
  bool wait_for_service(std::chrono::duration<Rep, Period> timeout) {
    return nerve::detail::check(nerve_client_wait_for_service(h_.get(), nerve::detail::timeout_u64(timeout)));
  }
  /// Calls the service and waits up to `timeout` for the response (nerve::Error on a
  /// failure, NERVE_ERR_TIMEOUT when none came).
  template <class Rep, class Period>
  Response call(const Request& request, std::chrono::duration<Rep, Period> timeout) {
    detail::payload(request, buf_);
    nerve_reply_t r{};
    nerve_sample_view_t v{};
    nerve::detail::check(
        nerve_client_call(h_.get(), buf_.data(), buf_.size(), nerve::detail::timeout_u64(timeout), &r, &v));
    struct Release {
      nerve_reply_t r;
      ~Release() { (void)nerve_reply_release(r); }
    } release{r};
    return detail::from_payload<Response>(v);
  }
  /// The C handle (still owned by this object).
  nerve_client_t handle() const noexcept { return h_.get(); }

 private:
  using Handle = nerve::detail::Owner<nerve_client_t, &nerve_client_destroy>;
  Handle h_;
  std::vector<std::uint8_t> buf_;
};

}  // namespace nerve::ros2
