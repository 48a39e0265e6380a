// GoogleTest suite of objects and threads: an object used on another thread throws
// NERVE_ERR_WRONG_THREAD; an object destroyed on another thread (publisher, sample,
// loan, moved-from objects) is released by its owner at its next call or while its
// executor spins, leaking nothing. No test asserts a timing bound: only orderings and
// counts (waits are bounded so a failure ends the test).

#include "common.hpp"

#include <nerve/msgs/cmd_vel.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>
#include <utility>

using namespace nerve_test;
using nerve::msgs::CmdVel;

namespace {

/// A context and a node of this test process.
struct Threads : ::testing::Test {
  nerve::Context ctx{options()};
  nerve::Node node{ctx, node_name("threads")};
};

/// Runs `f` on another thread and waits for it.
template <class F>
void elsewhere(F&& f) {
  std::thread t(std::forward<F>(f));
  t.join();
}

/// Calls `cond` (a call of the owner's each time) until it holds, for at most 20 s.
template <class F>
bool eventually(F cond) {
  const auto end = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(5ms);
  }
  return cond();
}

}  // namespace

TEST_F(Threads, UseOnAnotherThreadThrowsWrongThread) {
  nerve::Publisher<CmdVel> pub(node, unique("use"));
  nerve_status_t code = NERVE_OK;
  std::string what;
  elsewhere([&] {
    try {
      (void)pub.subscriber_count();
    } catch (const nerve::Error& e) {
      code = e.code();
      what = e.what();
    }
  });
  EXPECT_EQ(code, NERVE_ERR_WRONG_THREAD);
  EXPECT_TRUE(contains(what, "NERVE_ERR_WRONG_THREAD")) << what;
  EXPECT_EQ(pub.subscriber_count(), 0u);
}

TEST_F(Threads, PublisherDestroyedOnAnotherThreadIsReleasedByTheOwner) {
  const std::string topic = unique("destroy");
  nerve::Subscriber<CmdVel> sub(node, topic);
  const std::size_t base = nerve::live_handles();
  std::optional<nerve::Publisher<CmdVel>> pub(std::in_place, node, topic);
  EXPECT_EQ(nerve::live_handles(), base + 1);
  EXPECT_EQ(sub.publisher_count(), 1u);
  // the destructor runs on the other thread
  elsewhere([p = std::move(*pub)]() mutable { nerve::Publisher<CmdVel> gone = std::move(p); });
  pub.reset();  // moved-from: holds nothing
  EXPECT_TRUE(eventually([&] { return sub.publisher_count() == 0; }));
  EXPECT_EQ(nerve::live_handles(), base);
}

TEST_F(Threads, SampleAndLoanDestroyedOnAnotherThreadGoBack) {
  const std::string topic = unique("samples");
  nerve::Qos one_each;
  one_each.max_loans = 1;
  nerve::Subscriber<CmdVel> sub(node, topic, one_each);
  nerve::Publisher<CmdVel> pub(node, topic, one_each);
  const std::size_t base = nerve::live_handles();
  pub.publish(CmdVel{});
  pub.publish(CmdVel{});
  {
    std::optional<nerve::Sample<CmdVel>> held = sub.take(5s);
    ASSERT_TRUE(held);
    const std::size_t holding = nerve::live_handles();
    elsewhere([s = std::move(*held)]() mutable { auto gone = std::move(s); });
    // released at this thread's next call
    EXPECT_EQ(nerve::live_handles(), holding - 1);
    auto second = sub.try_take();
    EXPECT_TRUE(second.ok()) << second.error_message();
  }
  {
    nerve::Loan<CmdVel> loan = pub.loan();
    EXPECT_FALSE(pub.try_loan().ok());  // one loan at a time
    elsewhere([l = std::move(loan)]() mutable { auto gone = std::move(l); });
    auto again = pub.try_loan();
    EXPECT_TRUE(again.ok()) << again.error_message();
  }
  EXPECT_EQ(nerve::live_handles(), base);
}

TEST_F(Threads, MovedFromObjectsDestroyAnywhere) {
  nerve::Publisher<CmdVel> pub(node, unique("moved"));
  nerve::Publisher<CmdVel> kept = std::move(pub);
  const std::size_t base = nerve::live_handles();
  elsewhere([p = std::move(pub)]() mutable { auto gone = std::move(p); });
  EXPECT_EQ(nerve::live_handles(), base);
  EXPECT_EQ(kept.subscriber_count(), 0u);
}

TEST(ThreadsExit, ObjectsOfAnExitedThreadDestroyAsNoOps) {
  std::optional<nerve::Publisher<CmdVel>> pub;
  std::optional<nerve::Node> node;
  std::optional<nerve::Context> ctx;
  elsewhere([&] {
    ctx.emplace(options());
    node.emplace(*ctx, node_name("exited"));
    pub.emplace(*node, unique("exited"));
  });
  // their thread's table dropped them; using one is stale, destroying one is fine
  try {
    (void)pub->subscriber_count();
    ADD_FAILURE() << "a handle of an exited thread is stale";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_STALE_HANDLE);
  }
  pub.reset();
  node.reset();
  ctx.reset();
  EXPECT_EQ(nerve::live_handles(), 0u);
}
