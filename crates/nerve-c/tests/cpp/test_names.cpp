// GoogleTest suite of names in C++: topics and services resolve as in Rust (relative
// names under the context's namespace, private "~/x" names under the node, remap rules),
// the resolved names are readable, and a C++ publisher on "chatter" in /robot1 reaches a
// subscriber of "/robot1/chatter" in the root namespace.

#include "common.hpp"

#include <nerve/msgs/add_two_ints.hpp>
#include <nerve/msgs/cmd_vel.hpp>
#include <nerve/msgs/fibonacci.hpp>

#include <string>

using namespace nerve_test;
using nerve::msgs::AddTwoInts;
using nerve::msgs::CmdVel;

namespace {

/// Options of a context in /robot1 with remap rules.
nerve::ContextOptions in_robot1() {
  nerve::ContextOptions o = options();
  o.node_namespace = "/robot1";
  o.remap = "cmd:=/base/cmd; ~/state:=status";
  return o;
}

}  // namespace

TEST(Names, RelativePrivateAndRemappedNamesResolve) {
  nerve::Context ctx(in_robot1());
  nerve::Node talker(ctx, "talker");
  EXPECT_EQ(talker.name(), "/robot1/talker");
  nerve::Publisher<CmdVel> chatter(talker, "chatter");
  EXPECT_EQ(chatter.topic_name(), "/robot1/chatter");
  nerve::Publisher<CmdVel> cmd(talker, "cmd");
  EXPECT_EQ(cmd.topic_name(), "/base/cmd");
  nerve::Subscriber<CmdVel> state(talker, "~/state");
  EXPECT_EQ(state.topic_name(), "/robot1/status");
  nerve::Subscriber<CmdVel> odom(talker, "~/odom");
  EXPECT_EQ(odom.topic_name(), "/robot1/talker/odom");
  nerve::Subscriber<CmdVel> absolute(talker, "/imu_cmd");
  EXPECT_EQ(absolute.topic_name(), "/imu_cmd");
  nerve::Server<AddTwoInts> server(talker, "add");
  EXPECT_EQ(server.service_name(), "/robot1/add");
  nerve::Client<AddTwoInts> client(talker, "add");
  EXPECT_EQ(client.service_name(), "/robot1/add");
}

TEST(Names, ARelativePublisherReachesTheAbsoluteSubscriber) {
  nerve::Context ctx(in_robot1());
  nerve::Node talker(ctx, "talker");
  nerve::Publisher<CmdVel> pub(talker, "chatter");
  nerve::Context root(options());
  nerve::Node listener(root, node_name("listener"));
  nerve::Subscriber<CmdVel> sub(listener, "/robot1/chatter");
  ASSERT_TRUE(pub.wait_for_subscribers(1, 5s));
  CmdVel c{};
  c.linear = 1.5f;
  pub.publish(c);
  auto s = sub.take(5s);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ((*s)->linear, 1.5f);
}

TEST(Names, BadNamespaceAndRulesAreRefusedByName) {
  nerve::ContextOptions o = options();
  o.node_namespace = "robot1";
  try {
    nerve::Context ctx(o);
    FAIL() << "a relative namespace must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_CONTEXT);
    EXPECT_TRUE(contains(e.what(), "robot1")) << e.what();
  }
  nerve::ContextOptions r = options();
  r.remap = "a:=1b";
  try {
    nerve::Context ctx(r);
    FAIL() << "a bad remap rule must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_CONTEXT);
    EXPECT_TRUE(contains(e.what(), "1b")) << e.what();
  }
}

TEST(Names, ActionNamesResolveAndReadIntoCBuffers) {
  nerve::Context ctx(in_robot1());
  nerve::Node node(ctx, "planner");
  nerve::ActionServer<nerve::msgs::Fibonacci> server(node, "fib");
  EXPECT_EQ(server.name(), "/robot1/fib");
  nerve::ActionClient<nerve::msgs::Fibonacci> client(node, "~/fib");
  EXPECT_EQ(client.name(), "/robot1/planner/fib");
  nerve::ActionClient<nerve::msgs::Fibonacci> remapped(node, "cmd");
  EXPECT_EQ(remapped.name(), "/base/cmd");

  // the C convention: the size needed, NERVE_ERR_BUFFER_TOO_SMALL when the buffer is short
  std::size_t needed = 0;
  EXPECT_EQ(nerve_action_server_name(server.handle(), nullptr, 0, &needed), NERVE_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(needed, std::string("/robot1/fib").size() + 1);
  std::string buf(needed, '\0');
  EXPECT_EQ(nerve_action_server_name(server.handle(), buf.data(), buf.size(), &needed), NERVE_OK);
  EXPECT_STREQ(buf.c_str(), "/robot1/fib");
  EXPECT_EQ(nerve_action_client_name(nerve_action_client_t{}, buf.data(), buf.size(), &needed),
            NERVE_ERR_BAD_HANDLE);
}
