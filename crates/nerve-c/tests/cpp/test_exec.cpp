// GoogleTest suite of the C++ API: the executor (subscriber callbacks, exceptions from
// callbacks, callback lifetimes, stop, re-entrance), timers and one-shot timers, and
// parameters. Timers are checked by counts and order only, never by timing bounds.

#include "common.hpp"

#include <nerve/msgs/bytes.hpp>
#include <nerve/msgs/cmd_vel.hpp>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <vector>

using namespace nerve_test;
using nerve::msgs::Bytes;
using nerve::msgs::CmdVel;

namespace {

struct Exec : ::testing::Test {
  nerve::Context ctx{options()};
  nerve::Node node{ctx, node_name("exec")};
  nerve::Executor exec{ctx};

  /// Spins until `done()` or a generous number of rounds passed; whether done.
  template <class F>
  bool spin_until(F done, int rounds = 2000) {
    for (int i = 0; i < rounds && !done(); ++i) exec.spin_once(10ms);
    return done();
  }
};

/// An exception type of the tests, to check that spin rethrows the very exception.
struct Boom : std::runtime_error {
  int n;
  explicit Boom(int n) : std::runtime_error("boom " + std::to_string(n)), n(n) {}
};

}  // namespace

// ---------------------------------------------------------------------------------------
// Subscriber callbacks
// ---------------------------------------------------------------------------------------

TEST_F(Exec, SubscriberCallbacksSeeEverySample) {
  const std::string topic = unique("exec_sub");
  nerve::Publisher<Bytes> pub(node, topic);
  std::vector<std::uint64_t> tags;
  std::vector<std::size_t> sizes;
  nerve::Subscriber<Bytes> sub(node, topic);
  exec.add(std::move(sub), [&](nerve::SampleRef<Bytes> s) {
    tags.push_back(s->tag);
    sizes.push_back(s.elems().size());
    EXPECT_GE(s.seq(), 1u);
    EXPECT_GT(s.stamp_ns(), 0u);
    EXPECT_NE(s.publisher_id(), 0u);
  });
  EXPECT_FALSE(static_cast<bool>(sub));  // the executor owns it now
  std::vector<float> plain;
  const std::string topic2 = unique("exec_plain");
  nerve::Publisher<CmdVel> pub2(node, topic2);
  exec.add(nerve::Subscriber<CmdVel>(node, topic2), [&](const CmdVel& m) { plain.push_back(m.linear); });

  for (std::uint64_t i = 1; i <= 3; ++i) {
    Bytes h{};
    h.tag = i;
    const std::vector<std::uint8_t> data(i, 1);
    pub.publish(h, data);
    CmdVel m{};
    m.linear = static_cast<float>(i);
    pub2.publish(m);
  }
  ASSERT_TRUE(spin_until([&] { return tags.size() == 3 && plain.size() == 3; }));
  EXPECT_EQ(tags, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(sizes, (std::vector<std::size_t>{1, 2, 3}));
  EXPECT_EQ(plain, (std::vector<float>{1, 2, 3}));
}

TEST_F(Exec, SubscriberExceptionReachesSpinAndExecutorGoesOn) {
  const std::string topic = unique("exec_throw");
  nerve::Publisher<CmdVel> pub(node, topic);
  std::vector<int> seen;
  exec.add(nerve::Subscriber<CmdVel>(node, topic), [&](const CmdVel& m) {
    const int n = static_cast<int>(m.linear);
    seen.push_back(n);
    if (n == 2) throw Boom(n);
  });
  for (int i = 1; i <= 3; ++i) {
    CmdVel m{};
    m.linear = static_cast<float>(i);
    pub.publish(m);
  }
  bool thrown = false;
  for (int round = 0; round < 2000 && seen.size() < 3; ++round) {
    try {
      exec.spin_once(10ms);
    } catch (const Boom& b) {  // the very exception, with its type
      EXPECT_EQ(b.n, 2);
      EXPECT_STREQ(b.what(), "boom 2");
      EXPECT_FALSE(thrown) << "thrown once";
      thrown = true;
    }
  }
  EXPECT_TRUE(thrown);
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));  // the third sample came after the throw

  // still usable afterwards
  CmdVel m{};
  m.linear = 4.0f;
  pub.publish(m);
  ASSERT_TRUE(spin_until([&] { return seen.size() == 4; }));
  EXPECT_EQ(seen.back(), 4);
}

TEST_F(Exec, NonStandardExceptionsAreRethrownToo) {
  const std::string topic = unique("exec_int");
  nerve::Publisher<CmdVel> pub(node, topic);
  exec.add(nerve::Subscriber<CmdVel>(node, topic), [](nerve::SampleRef<CmdVel>) { throw 42; });
  pub.publish(CmdVel{});
  int caught = 0;
  for (int i = 0; i < 2000 && caught == 0; ++i) {
    try {
      exec.spin_once(10ms);
    } catch (int v) {
      caught = v;
    }
  }
  EXPECT_EQ(caught, 42);
}

TEST_F(Exec, CallbackStateIsFreedWithTheExecutor) {
  auto token = std::make_shared<int>(7);
  const std::string topic = unique("exec_drop");
  {
    nerve::Executor e(ctx);
    e.add(nerve::Subscriber<CmdVel>(node, topic), [token](nerve::SampleRef<CmdVel>) {});
    nerve::Timer t = e.add_timer("drop_timer", 1h, [token] {});
    nerve::Timer o = e.add_one_shot("drop_once", 0ms, [token](const nerve::Tick&) {});
    EXPECT_EQ(token.use_count(), 4);
    nerve::Executor moved(std::move(e));  // moving keeps the callbacks
    EXPECT_EQ(token.use_count(), 4);
  }
  EXPECT_EQ(token.use_count(), 1);  // the ABI's drop callbacks deleted them
}

TEST_F(Exec, FailedAddFreesTheCallbackAndThrows) {
  auto token = std::make_shared<int>(7);
  nerve::Subscriber<CmdVel> sub(node, unique("exec_fail"));
  nerve::Subscriber<CmdVel> taken = std::move(sub);
  try {
    exec.add(std::move(sub), [token](nerve::SampleRef<CmdVel>) {});  // NOLINT: moved-from
    FAIL() << "adding a moved-from subscriber must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_BAD_HANDLE);
  }
  EXPECT_EQ(token.use_count(), 1);
  // a subscriber of another context is refused and stays with its owner
  nerve::Context other(options());
  nerve::Node other_node(other, node_name("other"));
  nerve::Subscriber<CmdVel> foreign(other_node, unique("exec_foreign"));
  try {
    exec.add(std::move(foreign), [token](nerve::SampleRef<CmdVel>) {});
    FAIL() << "a subscriber of another context must be refused";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_WRONG_CONTEXT) << e.what();
  }
  EXPECT_EQ(token.use_count(), 1);
  EXPECT_TRUE(static_cast<bool>(foreign));
  EXPECT_NO_THROW((void)foreign.take());
}

TEST_F(Exec, MovedFromExecutorThrows) {
  nerve::Executor moved(std::move(exec));
  try {
    exec.spin_once(0ms);  // NOLINT
    FAIL() << "a moved-from executor must throw";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_BAD_HANDLE);
  }
  EXPECT_THROW(exec.add_timer("x", 1s, [] {}), nerve::Error);  // NOLINT
  EXPECT_EQ(moved.spin_once(0ms), 0u);
  exec = std::move(moved);
}

// ---------------------------------------------------------------------------------------
// Stop, re-entrance
// ---------------------------------------------------------------------------------------

TEST_F(Exec, StopFromACallbackEndsSpin) {
  int fired = 0;
  nerve::Timer t = exec.add_timer("stopper", 1ms, [&] {
    if (++fired == 3) exec.stop();
  });
  exec.spin();  // returns once stopped
  EXPECT_EQ(fired, 3);
  // stop is sticky: spins of a stopped executor return at once
  exec.spin();
  exec.spin_for(1h);
  EXPECT_EQ(fired, 3);
}

TEST_F(Exec, SpinningFromACallbackIsBusy) {
  nerve_status_t code = NERVE_OK;
  nerve::Timer t = exec.add_timer("nested", 1ms, [&] {
    try {
      exec.spin_once(0ms);
    } catch (const nerve::Error& e) {
      code = e.code();
      throw;
    }
  });
  try {
    ASSERT_TRUE(spin_until([&] { return code != NERVE_OK; }));
    FAIL() << "the nested spin's error must reach the outer spin";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_BUSY) << e.what();
  }
  EXPECT_EQ(code, NERVE_ERR_BUSY);
}

// ---------------------------------------------------------------------------------------
// Timers
// ---------------------------------------------------------------------------------------

TEST_F(Exec, PeriodicTimerCountsFirings) {
  std::vector<std::uint64_t> counts;
  nerve::Timer t = exec.add_timer("periodic", 1ms, [&](const nerve::Tick& tick) {
    counts.push_back(tick.count);
    EXPECT_GE(tick.fired_ns, tick.deadline_ns);
  });
  ASSERT_TRUE(spin_until([&] { return counts.size() >= 3; }));
  // counts go 1, 2, 3, ... (a skipped tick is counted in `skipped`, not here)
  for (std::size_t i = 0; i < counts.size(); ++i) EXPECT_EQ(counts[i], i + 1);
  EXPECT_EQ(t.fired(), counts.size());

  t.cancel();
  const std::size_t at_cancel = counts.size();
  exec.spin_for(20ms);
  EXPECT_EQ(counts.size(), at_cancel);  // cancelled: no firing
  EXPECT_EQ(t.fired(), at_cancel);

  t.arm(1ms);
  ASSERT_TRUE(spin_until([&] { return counts.size() >= at_cancel + 2; }));
  EXPECT_EQ(counts[at_cancel], at_cancel + 1);
}

TEST_F(Exec, OneShotTimerFiresOncePerArming) {
  int fired = 0;
  nerve::Timer once = exec.add_one_shot("once", 1ms, [&] { ++fired; });
  ASSERT_TRUE(spin_until([&] { return fired == 1; }));
  exec.spin_for(20ms);
  EXPECT_EQ(fired, 1);
  EXPECT_EQ(once.fired(), 1u);
  once.arm(1ms);
  ASSERT_TRUE(spin_until([&] { return fired == 2; }));
  exec.spin_for(10ms);
  EXPECT_EQ(fired, 2);

  // armed 0: disarmed until armed
  int later = 0;
  nerve::Timer idle = exec.add_one_shot("idle", 0ms, [&] { ++later; });
  exec.spin_for(20ms);
  EXPECT_EQ(later, 0);
  idle.arm(0ms);
  ASSERT_TRUE(spin_until([&] { return later == 1; }));
}

TEST_F(Exec, OneShotsFireOnceEachInDeadlineOrder) {
  // registered in deadline order, so that the order holds even when a stalled machine
  // finds all three due at once (then they run in registration order)
  std::vector<int> order;
  nerve::Timer a = exec.add_one_shot("first", 1ms, [&] { order.push_back(1); });
  nerve::Timer b = exec.add_one_shot("second", 20ms, [&] { order.push_back(2); });
  nerve::Timer c = exec.add_one_shot("third", 40ms, [&] { order.push_back(3); });
  ASSERT_TRUE(spin_until([&] { return order.size() == 3; }));
  exec.spin_for(10ms);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(a.fired() + b.fired() + c.fired(), 3u);
}

TEST_F(Exec, TimerExceptionReachesSpinAndTimerGoesOn) {
  int fired = 0;
  nerve::Timer t = exec.add_timer("thrower", 1ms, [&] {
    ++fired;
    if (fired == 2) throw std::logic_error("second tick failed");
  });
  bool thrown = false;
  for (int i = 0; i < 2000 && fired < 4; ++i) {
    try {
      exec.spin_once(10ms);
    } catch (const std::logic_error& e) {
      EXPECT_STREQ(e.what(), "second tick failed");
      thrown = true;
    }
  }
  EXPECT_TRUE(thrown);
  EXPECT_GE(fired, 4);
  // spin_for rethrows as well
  nerve::Timer once = exec.add_one_shot("once_thrower", 1ms, [] { throw Boom(5); });
  t.cancel();
  EXPECT_THROW(exec.spin_for(10s), Boom);
  EXPECT_NO_THROW(exec.spin_for(5ms));
}

TEST_F(Exec, TimerValidation) {
  try {
    (void)exec.add_timer("zero", 0ms, [] {});
    FAIL() << "a zero period must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_INVALID_ARGUMENT);
  }
  nerve::Timer t = exec.add_timer("released", 1h, [] {});
  nerve::Timer moved = std::move(t);
  EXPECT_THROW(t.cancel(), nerve::Error);  // NOLINT
  EXPECT_NO_THROW(moved.cancel());
  EXPECT_EQ(moved.fired(), 0u);
}

// ---------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------

TEST_F(Exec, ParametersDeclareGetSet) {
  nerve::Parameters p = node.parameters();
  EXPECT_EQ(p.declare("enabled", true, "whether it runs"), true);
  EXPECT_EQ(p.declare<std::int64_t>("count", 5, "how many"), 5);
  EXPECT_EQ(p.declare("ratio", 0.25, "a ratio"), 0.25);
  EXPECT_EQ(p.declare("frame", std::string("base_link"), "the frame"), "base_link");
  EXPECT_EQ(p.declare("literal", "123"), "123");  // stays a string (quoted for YAML)
  EXPECT_EQ(p.declare<int>("small", 3), 3);

  EXPECT_EQ(p.get<bool>("enabled"), true);
  EXPECT_EQ(p.get<std::int64_t>("count"), 5);
  EXPECT_EQ(p.get<double>("ratio"), 0.25);
  EXPECT_EQ(p.get<std::string>("frame"), "base_link");
  EXPECT_EQ(p.get<std::string>("literal"), "123");

  p.set("enabled", false);
  p.set<std::int64_t>("count", 9);
  p.set("ratio", 0.5);
  p.set("frame", std::string("odom \"quoted\"\n\\"));
  p.set("literal", "true");
  EXPECT_EQ(p.get<bool>("enabled"), false);
  EXPECT_EQ(p.get<std::int64_t>("count"), 9);
  EXPECT_EQ(p.get<int>("count"), 9);
  EXPECT_EQ(p.get<double>("ratio"), 0.5);
  EXPECT_EQ(p.get<std::string>("frame"), "odom \"quoted\"\n\\");
  EXPECT_EQ(p.get<std::string>("literal"), "true");
  EXPECT_EQ(p.get_text("count"), "9");  // any parameter as JSON text

  // the text forms: arrays
  p.declare_text("gains", "[1.0, 2.5]", "PID gains");
  EXPECT_EQ(p.get_text("gains"), "[1.0,2.5]");
  p.set_text("gains", "[3.0]");
  EXPECT_EQ(p.get_text("gains"), "[3.0]");

  // errors
  try {
    (void)p.get<bool>("count");
    FAIL() << "a wrong type must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_PARAM);
    EXPECT_TRUE(contains(e.what(), "count")) << e.what();
  }
  try {
    (void)p.get<std::int64_t>("missing");
    FAIL() << "an undeclared parameter must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_PARAM);
    EXPECT_TRUE(contains(e.what(), "not declared")) << e.what();
  }
  EXPECT_THROW(p.set("count", std::string("many")), nerve::Error);
  EXPECT_THROW(p.set("missing", 1.0), nerve::Error);
  EXPECT_THROW(p.set_text("gains", "[unclosed"), nerve::Error);
  p.set<std::int64_t>("count", 1LL << 40);
  EXPECT_THROW((void)p.get<std::int32_t>("count"), nerve::Error);  // out of range
  EXPECT_THROW(p.set("count", std::numeric_limits<std::uint64_t>::max()), nerve::Error);

  // a long string goes through the growing buffer
  const std::string long_text(500, 'z');
  p.set("frame", long_text);
  EXPECT_EQ(p.get<std::string>("frame"), long_text);

  EXPECT_EQ(p.handle_pending(), 0u);
  EXPECT_NO_THROW(exec.add(p));
  EXPECT_NO_THROW(exec.spin_once(1ms));
  nerve::Parameters moved = std::move(p);
  EXPECT_THROW((void)p.get<bool>("enabled"), nerve::Error);  // NOLINT
  EXPECT_EQ(moved.get<bool>("enabled"), false);
}

// ---------------------------------------------------------------------------------------
// Shutdown (process-wide: checked in a child process)
// ---------------------------------------------------------------------------------------

namespace {
/// In the child: a shutdown request stops spin() at once and is seen everywhere.
[[noreturn]] void shutdown_child() {
  int code = 1;
  {
    nerve::Context ctx(options());
    nerve::Node node(ctx, node_name("shutdown"));
    nerve::Executor exec(ctx);
    int fired = 0;
    nerve::Timer t = exec.add_timer("until_shutdown", 1ms, [&] {
      if (++fired == 2) nerve::shutdown_request();
    });
    const bool before = nerve::shutdown_requested();
    exec.spin();  // returns once the timer requested the shutdown
    nerve::Subscriber<CmdVel> sub(node, unique("shutdown"));
    const bool waited = sub.take(nerve::forever).has_value();  // returns at once too
    code = (!before && nerve::shutdown_requested() && fired == 2 && !waited) ? 0 : 3;
  }
  std::error_code ec;
  std::filesystem::remove_all(state_dir(), ec);
  std::exit(code);
}
}  // namespace

#if GTEST_HAS_DEATH_TEST
TEST(Shutdown, RequestStopsSpinAndWaits) {
#ifdef GTEST_FLAG_SET
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child re-executes this program
#else
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
#endif
  EXPECT_EXIT(shutdown_child(), ::testing::ExitedWithCode(0), "");
}
#endif
