// GoogleTest suite of the C++ API: ROS 2 types (nerve/ros2.hpp) with the classes
// `nerve types gen-cpp` generated from ROS 2's test_msgs (examples/cpp/ros2_msgs, kept
// current by `cargo test -p nerve-c --test ros2_codegen`). The bridge to ROS 2 itself is
// tested in crates/nerve-py/tests/test_ros2_cpp.py.

#include "common.hpp"

#include <nerve/ros2.hpp>
#include <test_msgs/action/nested_message.hpp>
#include <test_msgs/msg/bounded_sequences.hpp>
#include <test_msgs/msg/unbounded_sequences.hpp>
#include <test_msgs/srv/basic_types.hpp>

#include <atomic>
#include <mutex>
#include <thread>

using namespace nerve_test;
using test_msgs::action::NestedMessage;
using test_msgs::msg::UnboundedSequences;

namespace {

struct Ros2 : ::testing::Test {
  nerve::Context ctx{options()};
  nerve::Node node{ctx, node_name("ros2")};
};

UnboundedSequences sample() {
  UnboundedSequences m;
  m.bool_values = {true, false};
  m.byte_values = {0, 255};
  m.float32_values = {1.5f};
  m.int64_values = {-1, 9223372036854775807LL};
  m.string_values = {"", "h\xC3\xA9"};
  test_msgs::msg::BasicTypes b;
  b.int16_value = -3;
  b.float64_value = 0.25;
  m.basic_types_values = {b, b};
  m.defaults_values.resize(1);
  m.alignment_check = 7;
  return m;
}

}  // namespace

TEST_F(Ros2, GeneratedClassesReadLikeRosidlsAndKeepTheirDefaults) {
  UnboundedSequences m;
  EXPECT_TRUE(m.int32_values.empty());
  EXPECT_EQ(m.int32_values_default, (std::vector<std::int32_t>{0, 2147483647, -2147483647 - 1}));
  EXPECT_EQ(m.string_values_default, (std::vector<std::string>{"", "max value", "min value"}));
  test_msgs::msg::Defaults d;
  EXPECT_TRUE(d.bool_value);
  EXPECT_EQ(d.byte_value, 50);
  EXPECT_EQ(test_msgs::msg::Constants::INT32_CONST, -30000);
  // a nested builtin_interfaces/Time is Nerve's own Time
  static_assert(std::is_same_v<decltype(NestedMessage::Goal{}.nested_different_pkg), nerve::msgs::Time>);
  EXPECT_EQ(nerve::cdr::message_traits<UnboundedSequences>::type_name, "test_msgs/msg/UnboundedSequences");
}

TEST_F(Ros2, APublisherAndASubscriberOfARos2TypeCarryItsCdr) {
  const std::string topic = unique("seqs");
  // nerve::Publisher/Subscriber of a generated ROS 2 type are nerve::ros2's
  nerve::Subscriber<UnboundedSequences> sub = node.subscriber<UnboundedSequences>(topic);
  nerve::Publisher<UnboundedSequences> pub(node, topic);
  static_assert(std::is_base_of_v<nerve::ros2::Publisher<UnboundedSequences>, decltype(pub)>);
  ASSERT_TRUE(pub.wait_for_subscribers(1, 10s));
  const UnboundedSequences m = sample();
  pub.publish(m);
  std::optional<UnboundedSequences> got = sub.take(10s);
  ASSERT_TRUE(got);
  EXPECT_EQ(*got, m);
  EXPECT_EQ(got->string_values[1], "h\xC3\xA9");
  EXPECT_FALSE(sub.take(0s));
  // the topic's schema is the carrier's, naming the ROS 2 type and its hash
  const std::string schema = nerve::ros2::schema_of<UnboundedSequences>();
  EXPECT_TRUE(contains(schema, "nerve_msgs/Ros2Cdr") || contains(schema, "test_msgs/msg/UnboundedSequences"))
      << schema;
  EXPECT_TRUE(contains(schema, "foreign=ros2cdr")) << schema;
  EXPECT_TRUE(contains(schema, std::string(nerve::cdr::message_traits<UnboundedSequences>::type_hash))) << schema;
}

TEST_F(Ros2, AMessageOverItsBoundIsRefusedWhenPublishedNotCut) {
  const std::string topic = unique("bounded");
  nerve::ros2::Publisher<test_msgs::msg::BoundedSequences> pub(node, topic);
  test_msgs::msg::BoundedSequences m;
  m.string_values = {"a", "b", "c", "d"};
  try {
    pub.publish(m);
    FAIL() << "published 4 strings into string[<=3]";
  } catch (const nerve::cdr::Error& e) {
    EXPECT_TRUE(contains(e.what(), "string_values: 4 elements exceed its bound of 3")) << e.what();
  }
}

TEST_F(Ros2, ADefinitionThatNoLongerHashesToTheHeadersHashIsRefused) {
  using Tr = nerve::cdr::message_traits<UnboundedSequences>;
  const std::string name(Tr::type_name), def(Tr::definition);
  const std::string other = "RIHS01_" + std::string(64, '0');
  char buf[16];
  std::size_t need = 0;
  EXPECT_EQ(nerve_ros2_schema(name.c_str(), other.c_str(), def.c_str(), buf, sizeof buf, &need),
            NERVE_ERR_TYPE_MISMATCH);
  EXPECT_TRUE(contains(nerve_last_error(), "regenerate")) << nerve_last_error();
  EXPECT_EQ(nerve_ros2_schema(name.c_str(), other.c_str(), "int32 x y z\n", buf, sizeof buf, &need), NERVE_ERR_SCHEMA);
  EXPECT_EQ(nerve_ros2_schema(nullptr, other.c_str(), def.c_str(), buf, sizeof buf, &need), NERVE_ERR_NULL);
  using A = nerve::cdr::action_traits<NestedMessage>;
  const std::string an(A::type_name), ad(A::definition);
  nerve_action_server_t s{};
  EXPECT_EQ(nerve_ros2_action_server_create(node.handle(), "/x", an.c_str(), other.c_str(), ad.c_str(), 0, 1, &s),
            NERVE_ERR_TYPE_MISMATCH);
  EXPECT_EQ(nerve_ros2_action_server_create(node.handle(), "/x", "test_msgs/msg/Nested", other.c_str(), ad.c_str(), 0,
                                            1, &s),
            NERVE_ERR_SCHEMA);
}

TEST_F(Ros2, AnActionOfARos2TypeServesTypedGoalsFeedbackAndResults) {
  const std::string name = unique("nested");
  std::atomic<bool> ready{false}, stop{false};
  std::mutex mu;
  std::string error;
  nerve_status_t garbage = NERVE_OK;
  std::thread server_thread([&] {
    try {
      nerve::Context sctx(options());
      nerve::Node snode(sctx, node_name("ros2_server"));
      nerve::ActionServer<NestedMessage> server(snode, name, NERVE_GOAL_PARALLEL, 4);
      ready = true;
      while (!stop) {
        server.spin_once(5ms, [](const NestedMessage::Goal& g) { return g.nested_field.int32_value >= 0; });
        while (auto g = server.take_goal()) {
          // a feedback that is not the action's CDR is refused by the Rust side
          const std::uint8_t bad[3] = {1, 2, 3};
          garbage = nerve_server_goal_feedback(g->handle(), bad, sizeof bad);
          NestedMessage::Feedback f;
          f.nested_field = g->goal().nested_field;
          f.nested_field.int32_value += 1;
          g->send_feedback(f);
          NestedMessage::Result r;
          r.nested_field = g->goal().nested_field;
          r.nested_different_pkg = g->goal().nested_different_pkg;
          r.nested_field_no_pkg = g->goal().nested_field_no_pkg;
          g->succeed(r);
        }
      }
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(mu);
      error = e.what();
      ready = true;
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } join{stop, server_thread};
  while (!ready) std::this_thread::yield();
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(error, "");
  }
  {
    nerve::ActionClient<NestedMessage> client(node, name);
    ASSERT_TRUE(client.wait_for_server(30s));
    NestedMessage::Goal goal;
    goal.nested_field.int32_value = 41;
    goal.nested_field.float64_value = 0.5;
    goal.nested_different_pkg.nanos = -1;  // 1969-12-31T23:59:59.999999999: sec -1, nanosec 999999999
    goal.nested_field_no_pkg.duration_value.sec = -2;
    nerve::ros2::Goal<NestedMessage> g = client.send_goal(goal);
    std::optional<nerve::ros2::GoalResult<NestedMessage>> r = g.result(60s);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->state, NERVE_GOAL_SUCCEEDED);
    EXPECT_EQ(r->result.nested_field, goal.nested_field);
    EXPECT_EQ(r->result.nested_different_pkg.nanos, -1);
    EXPECT_EQ(r->result.nested_field_no_pkg.duration_value.sec, -2);
    std::optional<NestedMessage::Feedback> f = g.try_feedback();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->nested_field.int32_value, 42);

    NestedMessage::Goal negative;
    negative.nested_field.int32_value = -1;
    EXPECT_THROW((void)client.send_goal(negative), nerve::Error);  // NOLINT
  }
  stop = true;
  server_thread.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(garbage, NERVE_ERR_INVALID_ARGUMENT);
}

TEST_F(Ros2, AServiceOfARos2TypeAnswersTypedRequests) {
  using test_msgs::srv::BasicTypes;
  const std::string name = unique("basic");
  std::atomic<bool> ready{false}, stop{false};
  std::string error;
  std::thread server_thread([&] {
    try {
      nerve::Context sctx(options());
      nerve::Node snode(sctx, node_name("ros2_srv"));
      nerve::Server<BasicTypes> server(snode, name);
      ready = true;
      while (!stop) {
        server.serve_once(5ms, [](const BasicTypes::Request& rq) {
          if (rq.int32_value < 0) throw std::invalid_argument("a negative int32_value");
          BasicTypes::Response r;
          r.int32_value = rq.int32_value + 1;
          r.string_value = rq.string_value + "!";
          return r;
        });
      }
    } catch (const std::exception& e) {
      error = e.what();
      ready = true;
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } join{stop, server_thread};
  while (!ready) std::this_thread::yield();
  ASSERT_EQ(error, "");
  nerve::Client<BasicTypes> client(node, name);
  ASSERT_TRUE(client.wait_for_service(30s));
  BasicTypes::Request rq;
  rq.int32_value = 41;
  rq.string_value = "hi";
  BasicTypes::Response r = client.call(rq, 30s);
  EXPECT_EQ(r.int32_value, 42);
  EXPECT_EQ(r.string_value, "hi!");
  rq.int32_value = -1;
  try {
    (void)client.call(rq, 30s);
    FAIL() << "the handler's exception did not fail the call";
  } catch (const nerve::Error& e) {
    EXPECT_TRUE(contains(e.what(), "a negative int32_value")) << e.what();
  }
}
