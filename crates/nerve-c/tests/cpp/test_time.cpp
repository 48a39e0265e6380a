// GoogleTest suite of robot time in C++ (issue 45): nerve::Clock is a std::chrono clock
// over Nerve's one clock; under simulation time (NERVE_SIM_TIME=1, a /clock publisher in
// the test) Context::now(), Node::now(), sample stamps, timer ticks and tf lookups at a
// nerve::Time all follow the published time.

#include "common.hpp"

#include <nerve/msgs/clock.hpp>
#include <nerve/msgs/cmd_vel.hpp>
#include <nerve/tf.hpp>
#include <nerve/time.hpp>

#include <cstdlib>
#include <ratio>
#include <thread>
#include <type_traits>

using namespace nerve_test;
using nerve::msgs::CmdVel;

// a std::chrono clock: the chrono algorithms take it
static_assert(std::is_same_v<nerve::Clock::rep, std::int64_t>);
static_assert(std::is_same_v<nerve::Clock::period, std::nano>);
static_assert(std::is_same_v<nerve::Clock::duration, std::chrono::nanoseconds>);
static_assert(std::is_same_v<nerve::Time, std::chrono::time_point<nerve::Clock, std::chrono::nanoseconds>>);
static_assert(std::is_same_v<nerve::Duration, std::chrono::nanoseconds>);
static_assert(!nerve::Clock::is_steady);

namespace {

/// A context on simulation time (NERVE_SIM_TIME=1 while it is created; ctest runs every
/// test in its own process, so the variable reaches no other test).
nerve::ContextOptions sim_options() {
  ::setenv("NERVE_SIM_TIME", "1", 1);
  return options();
}

constexpr std::int64_t kSimNs = 1700000000LL * 1000000000LL + 250000000LL;

/// Publishes `ns` on /clock from `driver` until `ctx` follows it (the feed thread
/// subscribes in the background); whether it did.
bool drive_clock(nerve::Publisher<nerve::msgs::Clock>& pub, const nerve::Context& ctx, std::int64_t ns) {
  for (int i = 0; i < 1000; ++i) {
    nerve::msgs::Clock c{};
    c.clock.nanos = ns;
    pub.publish(c);
    if (nerve::Clock::to_ns(ctx.now()) == ns) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

}  // namespace

TEST(Time, OnTheSystemClockNowIsTheSystemTime) {
  nerve::Context ctx(options());
  nerve::Node node(ctx, node_name("clock"));
  EXPECT_FALSE(ctx.sim_time());
  const auto before = std::chrono::system_clock::now();
  const nerve::Time t = node.now();
  const auto after = std::chrono::system_clock::now();
  EXPECT_LE(nerve::Clock::from_sys(before), t);
  EXPECT_GE(nerve::Clock::from_sys(after), t);
  EXPECT_LE(nerve::Clock::to_sys(t), after);
}

TEST(Time, ConversionsToTheTimeMessageAndSecondsKeepEveryNanosecond) {
  const nerve::Time t = nerve::Clock::from_ns(kSimNs);
  EXPECT_EQ(nerve::to_msg(t).nanos, kSimNs);
  EXPECT_EQ(nerve::from_msg(nerve::to_msg(t)), t);
  const nerve::SecNanosec s = nerve::to_sec_nanosec(t);
  EXPECT_EQ(s.sec, 1700000000);
  EXPECT_EQ(s.nanosec, 250000000u);
  EXPECT_EQ(nerve::from_sec_nanosec(s.sec, s.nanosec), t);
  // before the epoch: seconds round down, nanoseconds stay in [0, 1e9)
  const nerve::SecNanosec neg = nerve::to_sec_nanosec(nerve::Clock::from_ns(-1));
  EXPECT_EQ(neg.sec, -1);
  EXPECT_EQ(neg.nanosec, 999999999u);
  EXPECT_EQ(nerve::from_sec_nanosec(neg.sec, neg.nanosec), nerve::Clock::from_ns(-1));
}

TEST(Time, UnderSimulationTimeNowStampsTicksAndTfFollowTheClockTopic) {
  // the plain context first: the process clock (nerve::Clock::now()) is the first
  // context's, and everything below reads the simulated context's clock all the same
  nerve::Context plain(options());
  nerve::Context sim(sim_options());
  ::unsetenv("NERVE_SIM_TIME");
  ASSERT_TRUE(sim.sim_time());
  EXPECT_FALSE(plain.sim_time());
  EXPECT_EQ(nerve::Clock::to_ns(sim.now()), 0) << "no clock message yet";

  nerve::Node driver(plain, node_name("driver"));
  nerve::Publisher<nerve::msgs::Clock> clock_pub(driver, "/clock");
  ASSERT_TRUE(drive_clock(clock_pub, sim, kSimNs));
  nerve::Node node(sim, node_name("stamped"));
  EXPECT_EQ(node.now(), nerve::Clock::from_ns(kSimNs));
  EXPECT_EQ(sim.now(), nerve::Clock::from_ns(kSimNs));
  // the process clock is the first context's: the system clock here
  EXPECT_GT(nerve::Clock::now(), nerve::Clock::from_ns(kSimNs) + std::chrono::hours(24));

  // a sample published from the simulated context carries the simulated time
  const std::string topic = unique("stamped");
  nerve::Subscriber<CmdVel> sub(driver, topic);
  nerve::Publisher<CmdVel> pub(node, topic);
  ASSERT_TRUE(pub.wait_for_subscribers(1, 5s));
  pub.publish(CmdVel{});
  auto s = sub.take(5s);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->publish_time(), nerve::Clock::from_ns(kSimNs));
  EXPECT_EQ(s->wall_ns(), kSimNs);

  // tf: stamps and lookups at a nerve::Time
  nerve::tf::Buffer buffer;
  nerve::tf::Stamped st;
  st.parent = "map";
  st.child = "base";
  st.set_stamp(node.now());
  st.transform.translation = {1.0, 2.0, 3.0};
  EXPECT_EQ(st.stamp_ns, kSimNs);
  EXPECT_EQ(st.stamp(), node.now());
  ASSERT_TRUE(buffer.set_transform(st.parent, st.child, st.stamp(), st.transform));
  const nerve::tf::Transform at = buffer.lookup_transform("map", "base", node.now());
  EXPECT_EQ(at.translation[1], 2.0);
  EXPECT_TRUE(buffer.can_transform("map", "base", nerve::tf::LATEST_TIME));
  EXPECT_EQ(buffer.wait_for_transform("map", "base", node.now(), 1s).translation[2], 3.0);
  try {
    (void)buffer.wait_for_transform("map", "nowhere", node.now(), 1ms);
    FAIL() << "an unknown frame must time out";
  } catch (const nerve::Timeout& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_TIMEOUT);
  }

  // a timer runs on simulation time: it fires when the clock topic moves past its
  // deadline, and its tick tells the simulated time it fired at
  nerve::Executor exec(sim);
  nerve::Time fired_at{};
  std::uint64_t deadline = 0;
  int fired = 0;
  nerve::Timer once = exec.add_one_shot("once", 1s, [&](const nerve::Tick& t) {
    fired_at = t.time();
    deadline = t.deadline_ns;
    ++fired;
  });
  for (int i = 0; i < 5; ++i) exec.spin_once(10ms);
  EXPECT_EQ(fired, 0) << "the simulated clock stood still";
  ASSERT_TRUE(drive_clock(clock_pub, sim, kSimNs + 5000000000LL));
  for (int i = 0; i < 500 && fired == 0; ++i) exec.spin_once(10ms);
  ASSERT_EQ(fired, 1);
  EXPECT_EQ(fired_at, nerve::Clock::from_ns(kSimNs) + std::chrono::seconds(5));
  EXPECT_EQ(deadline, static_cast<std::uint64_t>(kSimNs + 1000000000LL));

  // time moves when the clock topic says so, backwards too
  EXPECT_EQ(node.now() - nerve::Clock::from_ns(kSimNs), std::chrono::seconds(5));
  ASSERT_TRUE(drive_clock(clock_pub, sim, kSimNs - 1000000000LL));
  EXPECT_EQ(sim.now(), nerve::Clock::from_ns(kSimNs) - std::chrono::seconds(1));
}
