// GoogleTest suite of the C++ API: the multi-threaded executor and its callback groups
// (rclcpp's MultiThreadedExecutor pattern). Setups run on the workers and create their
// entities there; a mutually exclusive group's callbacks never overlap; a reentrant
// group's callbacks run on different threads at once (they meet at a barrier); setup and
// callback exceptions reach spin(); stop() from another thread; misuse is an error.
// Nothing is asserted about timing: waits only end hangs.

#include "common.hpp"

#include <nerve/msgs/add_two_ints.hpp>
#include <nerve/msgs/cmd_vel.hpp>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace nerve_test;
using nerve::msgs::AddTwoInts;
using nerve::msgs::CmdVel;
using nerve::msgs::Int;
using nerve::msgs::TwoInts;

namespace {

/// An exception type of the tests, to check that spin rethrows the very exception.
struct Boom : std::runtime_error {
  int n;
  explicit Boom(int n) : std::runtime_error("boom " + std::to_string(n)), n(n) {}
};

/// Waits (bounded, to end a hang; not a timing assertion) until `done()`.
template <class F>
bool wait_until(F done, std::chrono::seconds limit = 60s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!done() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(1ms);
  return done();
}

/// Runs `mt.spin()` on a thread; what it threw, if anything.
struct Spinner {
  nerve::MultiThreadedExecutor& mt;
  std::exception_ptr error;
  std::thread t;
  explicit Spinner(nerve::MultiThreadedExecutor& m) : mt(m) {
    t = std::thread([this] {
      try {
        mt.spin(100ms);
      } catch (...) {
        error = std::current_exception();
      }
    });
  }
  void join() {
    if (t.joinable()) t.join();
  }
  ~Spinner() {
    mt.stop();
    join();
  }
};

CmdVel vel(float v) {
  CmdVel m{};
  m.linear = v;
  return m;
}

}  // namespace

TEST(MtExecutor, MutuallyExclusiveGroupNeverOverlaps) {
  const std::string a = unique("mt_me_a");
  const std::string b = unique("mt_me_b");
  constexpr int kEach = 20;
  std::atomic<int> inside{0};
  std::atomic<int> max_inside{0};
  std::atomic<int> got_a{0};
  std::atomic<int> got_b{0};
  std::mutex m;
  std::set<std::thread::id> threads;

  nerve::MultiThreadedExecutor mt(4, options());
  const nerve::GroupId me = mt.group(nerve::CallbackGroup::MutuallyExclusive);
  auto callback = [&](std::atomic<int>& counter) {
    return [&inside, &max_inside, &m, &threads, count = &counter](const CmdVel&) {
      const int now = ++inside;
      int seen = max_inside.load();
      while (now > seen && !max_inside.compare_exchange_weak(seen, now)) {
      }
      {
        std::lock_guard<std::mutex> g(m);
        threads.insert(std::this_thread::get_id());
      }
      std::this_thread::yield();  // widen the window an overlap would need
      --inside;
      ++*count;
    };
  };
  // two setups (two subscriptions, as in rclcpp) in one mutually exclusive group
  mt.add(me, [&, cb = callback(got_a)](nerve::Context& ctx, nerve::Executor& exec) {
    nerve::Node node(ctx, node_name("mt_me_a"));
    exec.add(nerve::Subscriber<CmdVel>(node, a, nerve::Qos::reliable()), cb);
  });
  mt.add(me, [&, cb = callback(got_b)](nerve::Context& ctx, nerve::Executor& exec) {
    nerve::Node node(ctx, node_name("mt_me_b"));
    exec.add(nerve::Subscriber<CmdVel>(node, b, nerve::Qos::reliable()), cb);
  });

  nerve::Context ctx(options());
  nerve::Node node(ctx, node_name("mt_me_pub"));
  nerve::Publisher<CmdVel> pa(node, a, nerve::Qos::reliable());
  nerve::Publisher<CmdVel> pb(node, b, nerve::Qos::reliable());
  {
    Spinner spinner(mt);
    ASSERT_TRUE(pa.wait_for_subscribers(1, 60s));
    ASSERT_TRUE(pb.wait_for_subscribers(1, 60s));
    for (int i = 0; i < kEach; ++i) {
      pa.publish(vel(static_cast<float>(i)));
      pb.publish(vel(static_cast<float>(i)));
    }
    EXPECT_TRUE(wait_until([&] { return got_a == kEach && got_b == kEach; }));
    mt.stop();
    spinner.join();
    ASSERT_FALSE(spinner.error);
  }
  EXPECT_EQ(got_a.load(), kEach);
  EXPECT_EQ(got_b.load(), kEach);
  EXPECT_EQ(max_inside.load(), 1) << "two callbacks of a mutually exclusive group overlapped";
  EXPECT_EQ(threads.size(), 1u) << "a mutually exclusive group runs on one worker";
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
}

TEST(MtExecutor, ReentrantGroupRunsCallbacksInParallel) {
  const std::string a = unique("mt_re_a");
  const std::string b = unique("mt_re_b");
  std::atomic<int> arrived{0};
  std::atomic<int> met{0};
  std::mutex m;
  std::vector<std::thread::id> threads;

  nerve::MultiThreadedExecutor mt(2, options());
  const nerve::GroupId re = mt.group(nerve::CallbackGroup::Reentrant);
  // each callback waits at a barrier for the other: both get past it only if they run
  // at the same time (on different threads); the bound only ends a hang
  auto meet = [&](const CmdVel&) {
    {
      std::lock_guard<std::mutex> g(m);
      threads.push_back(std::this_thread::get_id());
    }
    ++arrived;
    if (wait_until([&] { return arrived.load() >= 2; })) ++met;
  };
  for (const std::string* topic : {&a, &b}) {
    mt.add(re, [&, topic](nerve::Context& ctx, nerve::Executor& exec) {
      nerve::Node node(ctx, node_name("mt_re"));
      exec.add(nerve::Subscriber<CmdVel>(node, *topic), meet);
    });
  }

  nerve::Context ctx(options());
  nerve::Node node(ctx, node_name("mt_re_pub"));
  nerve::Publisher<CmdVel> pa(node, a);
  nerve::Publisher<CmdVel> pb(node, b);
  {
    Spinner spinner(mt);
    ASSERT_TRUE(pa.wait_for_subscribers(1, 60s));
    ASSERT_TRUE(pb.wait_for_subscribers(1, 60s));
    pa.publish(vel(1));
    pb.publish(vel(2));
    EXPECT_TRUE(wait_until([&] { return met.load() == 2; }));
    mt.stop();
    spinner.join();
    ASSERT_FALSE(spinner.error);
  }
  EXPECT_EQ(met.load(), 2) << "the reentrant group's callbacks did not overlap";
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_NE(threads[0], threads[1]);
}

TEST(MtExecutor, SetupObjectsLiveWithTheWorker) {
  // a setup makes a publisher and a server; a timer callback (which captures the
  // publisher) publishes from the worker, and the server answers this thread's calls
  const std::string topic = unique("mt_live");
  const std::string service = unique("mt_live_add");
  nerve::MultiThreadedExecutor mt(2, options());
  const nerve::GroupId g = mt.group(nerve::CallbackGroup::MutuallyExclusive);
  mt.add(g, [&](nerve::Context& ctx, nerve::Executor& exec) {
    nerve::Node node(ctx, node_name("mt_live"));
    auto pub = std::make_shared<nerve::Publisher<CmdVel>>(node, topic);
    (void)exec.add_timer("tick", 5ms, [pub] { pub->publish(vel(7)); });
    exec.serve(nerve::Server<AddTwoInts>(node, service), [](const TwoInts& r) {
      Int out{};
      out.value = r.a + r.b;
      return out;
    });
  });

  nerve::Context ctx(options());
  nerve::Node node(ctx, node_name("mt_live_sub"));
  nerve::Subscriber<CmdVel> sub(node, topic);
  nerve::Client<AddTwoInts> client(node, service);
  Spinner spinner(mt);
  std::optional<nerve::Sample<CmdVel>> s = sub.take(60s);
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)->linear, 7.0f);
  ASSERT_TRUE(client.wait_for_service(60s));
  TwoInts req{};
  req.a = 20;
  req.b = 22;
  EXPECT_EQ(client.call(req, 60s)->value, 42);
}

TEST(MtExecutor, SetupAndCallbackExceptionsReachSpin) {
  {
    nerve::MultiThreadedExecutor mt(2, options());
    const nerve::GroupId g = mt.group(nerve::CallbackGroup::Reentrant);
    mt.add(g, [](nerve::Context&, nerve::Executor&) { throw Boom(1); });
    mt.add(g, [](nerve::Executor&) {});  // the other worker is stopped
    try {
      mt.spin();
      FAIL() << "the setup's exception must reach spin";
    } catch (const Boom& e) {
      EXPECT_EQ(e.n, 1);
    }
  }
  {
    const std::string topic = unique("mt_throw");
    nerve::MultiThreadedExecutor mt(2, options());
    const nerve::GroupId g = mt.group(nerve::CallbackGroup::MutuallyExclusive);
    mt.add(g, [&](nerve::Context& ctx, nerve::Executor& exec) {
      nerve::Node node(ctx, node_name("mt_throw"));
      exec.add(nerve::Subscriber<CmdVel>(node, topic), [](const CmdVel& m) {
        throw Boom(static_cast<int>(m.linear));
      });
    });
    mt.add(mt.group(nerve::CallbackGroup::MutuallyExclusive), [](nerve::Executor& exec) {
      (void)exec.add_timer("idle", 10ms, [] {});
    });
    nerve::Context ctx(options());
    nerve::Node node(ctx, node_name("mt_throw_pub"));
    nerve::Publisher<CmdVel> pub(node, topic);
    std::exception_ptr error;
    std::thread t([&] {
      try {
        mt.spin();
      } catch (...) {
        error = std::current_exception();
      }
    });
    ASSERT_TRUE(pub.wait_for_subscribers(1, 60s));
    pub.publish(vel(5));
    t.join();  // the exception ends the spin of every worker
    ASSERT_TRUE(error);
    try {
      std::rethrow_exception(error);
    } catch (const Boom& e) {
      EXPECT_EQ(e.n, 5);
    }
  }
}

TEST(MtExecutor, StopFromAnotherThreadAndMisuse) {
  nerve::MultiThreadedExecutor mt(2, options());
  const nerve::GroupId g = mt.group(nerve::CallbackGroup::MutuallyExclusive);
  std::atomic<bool> started{false};
  mt.add(g, [&](nerve::Executor& exec) {
    (void)exec.add_timer("started", 1ms, [&] { started = true; });
  });
  {
    Spinner spinner(mt);
    ASSERT_TRUE(wait_until([&] { return started.load(); }));
    // changing it while it spins is refused
    try {
      (void)mt.group(nerve::CallbackGroup::Reentrant);
      FAIL() << "group() while spinning must fail";
    } catch (const nerve::Error& e) {
      EXPECT_EQ(e.code(), NERVE_ERR_BUSY) << e.what();
    }
    mt.stop();  // from this thread, while the workers spin
    spinner.join();
    EXPECT_FALSE(spinner.error);
  }
  // sticky: a later spin returns at once
  mt.spin();

  // a group of no executor, or of another one
  EXPECT_THROW(mt.add(nerve::GroupId(), [](nerve::Executor&) {}), nerve::Error);
  nerve::MultiThreadedExecutor other(1, options());
  const nerve::GroupId og = other.group(nerve::CallbackGroup::Reentrant);
  try {
    mt.add(og, [](nerve::Executor&) {});
    FAIL() << "another executor's group must be refused";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_INVALID_ARGUMENT) << e.what();
  }

  // the C ABI: bad arguments and handles
  nerve_mt_executor_t h{};
  EXPECT_EQ(nerve_mt_executor_create(0, nullptr, &h), NERVE_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nerve_mt_executor_create(1, nullptr, nullptr), NERVE_ERR_NULL);
  nerve_callback_group_t cg{};
  EXPECT_EQ(nerve_mt_executor_group(mt.handle(), 7, &cg), NERVE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(nerve_last_error(), "NERVE_GROUP_REENTRANT")) << nerve_last_error();
  EXPECT_EQ(nerve_mt_executor_stop(nerve_mt_executor_t{}), NERVE_ERR_BAD_HANDLE);
  nerve::Context ctx(options());
  EXPECT_EQ(nerve_mt_executor_stop(nerve_mt_executor_t{ctx.handle().id}), NERVE_ERR_WRONG_KIND);
  ASSERT_EQ(nerve_mt_executor_create(1, nullptr, &h), NERVE_OK);
  ASSERT_EQ(nerve_mt_executor_destroy(h), NERVE_OK);
  EXPECT_EQ(nerve_mt_executor_stop(h), NERVE_ERR_STALE_HANDLE);
  EXPECT_EQ(nerve_mt_executor_destroy(h), NERVE_ERR_STALE_HANDLE);
  EXPECT_EQ(nerve_mt_executor_add(mt.handle(), g.handle(), nullptr, nullptr, nullptr), NERVE_ERR_NULL);
}

TEST(MtExecutor, SetupsThatNeverRunAreDropped) {
  // the setup's captures are freed when the executor is destroyed unspun
  auto token = std::make_shared<int>(1);
  {
    nerve::MultiThreadedExecutor mt(2, options());
    mt.add(mt.group(nerve::CallbackGroup::Reentrant), [token](nerve::Executor&) {});
    EXPECT_EQ(token.use_count(), 2);
  }
  EXPECT_EQ(token.use_count(), 1);
}
