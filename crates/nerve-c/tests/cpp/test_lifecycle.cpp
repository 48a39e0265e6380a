// GoogleTest suite of managed (lifecycle) nodes in C++: the transitions and their
// callbacks, failure and exceptions (error processing), refusals with their messages,
// the gated LifecyclePublisher, and the services handed to an executor (driven remotely by `nerve lifecycle`, tested in
// crates/nerve-cli/tests/lifecycle.rs).

#include "common.hpp"

#include <nerve/lifecycle.hpp>
#include <nerve/msgs/cmd_vel.hpp>

#include <stdexcept>
#include <string>
#include <vector>

using namespace nerve_test;
using nerve::CallbackReturn;
using nerve::LifecycleState;

namespace {

struct Lifecycle : ::testing::Test {
  nerve::Context ctx{options()};
  nerve::Node node{ctx, node_name("lc")};
};

}  // namespace

TEST_F(Lifecycle, AFullCycleRunsEveryCallbackInOrder) {
  nerve::ManagedNode m(node);
  std::vector<std::string> seen;
  auto note = [&](const char* what) {
    return [&seen, what](LifecycleState prev) {
      seen.push_back(std::string(what) + " from " + nerve::state_label(prev));
      return CallbackReturn::Success;
    };
  };
  m.on_configure(note("configure"));
  m.on_activate(note("activate"));
  m.on_deactivate(note("deactivate"));
  m.on_cleanup(note("cleanup"));
  m.on_shutdown(note("shutdown"));
  EXPECT_EQ(m.state(), LifecycleState::Unconfigured);
  EXPECT_EQ(m.trigger("configure"), LifecycleState::Inactive);
  EXPECT_EQ(m.trigger("activate"), LifecycleState::Active);
  EXPECT_TRUE(m.is_active());
  EXPECT_EQ(m.trigger("deactivate"), LifecycleState::Inactive);
  EXPECT_EQ(m.trigger("cleanup"), LifecycleState::Unconfigured);
  EXPECT_EQ(m.trigger("shutdown"), LifecycleState::Finalized);
  const std::vector<std::string> want{"configure from unconfigured", "activate from inactive",
                                      "deactivate from active", "cleanup from inactive",
                                      "shutdown from unconfigured"};
  EXPECT_EQ(seen, want);
}

TEST_F(Lifecycle, FailureReturnsAndAnExceptionGoesThroughErrorProcessing) {
  nerve::ManagedNode m(node);
  m.on_configure([](LifecycleState) { return CallbackReturn::Failure; });
  try {
    m.trigger("configure");
    FAIL() << "a failing callback must throw";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_CALLBACK);
    EXPECT_NE(std::string(e.what()).find("now unconfigured"), std::string::npos) << e.what();
  }
  std::vector<LifecycleState> errors;
  m.on_error([&](LifecycleState prev) {
    errors.push_back(prev);
    return CallbackReturn::Failure;
  });
  m.on_configure([](LifecycleState) -> CallbackReturn { throw std::runtime_error("no lens"); });
  EXPECT_THROW(m.trigger("configure"), nerve::Error);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], LifecycleState::Configuring);
  EXPECT_EQ(m.state(), LifecycleState::Finalized);  // on_error failed
}

TEST_F(Lifecycle, AThrowingCallbacksMessageReachesTheTransitionsError) {
  nerve::ManagedNode m(node);
  m.on_configure([](LifecycleState) -> CallbackReturn { throw std::runtime_error("bad config"); });
  try {
    m.trigger("configure");
    FAIL() << "a throwing callback must throw";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_CALLBACK);
    EXPECT_TRUE(contains(e.what(), "bad config")) << e.what();
    EXPECT_TRUE(contains(e.what(), "now unconfigured")) << e.what();
  }
  EXPECT_EQ(m.state(), LifecycleState::Unconfigured);
  // an on_error that throws too: both messages
  m.on_error([](LifecycleState) -> CallbackReturn { throw std::runtime_error("cannot recover"); });
  try {
    m.trigger("configure");
    FAIL() << "a throwing callback must throw";
  } catch (const nerve::Error& e) {
    EXPECT_TRUE(contains(e.what(), "bad config")) << e.what();
    EXPECT_TRUE(contains(e.what(), "cannot recover")) << e.what();
  }
  EXPECT_EQ(m.state(), LifecycleState::Finalized);
}

TEST_F(Lifecycle, InvalidTransitionsAreRefusedNamingTheState) {
  nerve::ManagedNode m(node);
  try {
    m.trigger("activate");
    FAIL() << "activate from unconfigured must be refused";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("not valid from state unconfigured (valid: configure, shutdown)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(m.state(), LifecycleState::Unconfigured);
  try {
    m.on_configure(nullptr);  // an empty std::function: the trampoline reports an error
    m.trigger("configure");
    FAIL() << "an empty callback throws bad_function_call, which is an error";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_CALLBACK);
  }
}

TEST_F(Lifecycle, ItsServicesGoToOneExecutorOnce) {
  nerve::ManagedNode m(node);
  nerve::Executor exec(ctx);
  m.add_to(exec);
  try {
    m.add_to(exec);
    FAIL() << "a second executor must be refused";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_EXEC);
    EXPECT_NE(std::string(e.what()).find("already run on an executor"), std::string::npos) << e.what();
  }
  // local transitions still run while the executor serves the remote ones
  EXPECT_EQ(m.trigger("configure"), LifecycleState::Inactive);
  exec.spin_once(std::chrono::milliseconds(10));
  EXPECT_EQ(m.state(), LifecycleState::Inactive);
}

TEST_F(Lifecycle, APublisherSendsOnlyWhileActiveAndCountsWhatItDrops) {
  using nerve::msgs::CmdVel;
  using namespace std::chrono_literals;
  nerve::ManagedNode m(node);
  const std::string topic = unique("lc_gated");
  nerve::LifecyclePublisher<CmdVel> pub(m, node, topic);
  nerve::Subscriber<CmdVel> sub(node, topic);
  ASSERT_TRUE(pub.publisher().wait_for_subscribers(1, 5s));
  CmdVel msg{};
  msg.linear = 1.0f;
  EXPECT_FALSE(pub.is_active());
  EXPECT_FALSE(pub.publish(msg));  // unconfigured
  EXPECT_FALSE(pub.loan().has_value());
  m.trigger("configure");
  EXPECT_FALSE(pub.publish(msg));  // inactive
  m.trigger("activate");
  EXPECT_TRUE(m.is_active());
  EXPECT_TRUE(pub.is_active());
  msg.linear = 2.0f;
  EXPECT_TRUE(pub.publish(msg));
  auto loan = pub.loan();
  ASSERT_TRUE(loan.has_value());
  (*loan)->linear = 3.0f;
  EXPECT_TRUE(pub.send(std::move(*loan)));
  // a loan taken while active and sent after deactivating is dropped
  auto late = pub.loan();
  ASSERT_TRUE(late.has_value());
  (*late)->linear = 4.0f;
  m.trigger("deactivate");
  EXPECT_FALSE(pub.send(std::move(*late)));
  auto r = pub.try_publish(msg);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(pub.dropped(), 5u);
  // only the samples sent while active arrived
  auto a = sub.take(5s);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ((*a)->linear, 2.0f);
  auto b = sub.take(5s);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ((*b)->linear, 3.0f);
  EXPECT_FALSE(sub.take().has_value());
  // the managed node gone, the gate stays shut
  nerve::LifecyclePublisher<CmdVel> orphan;
  {
    nerve::ManagedNode gone(nerve::Node(ctx, node_name("lc_gone")));
    gone.trigger("configure");
    gone.trigger("activate");
    orphan = nerve::LifecyclePublisher<CmdVel>(gone, node, topic);
    EXPECT_TRUE(orphan.is_active());
  }
  EXPECT_FALSE(orphan.is_active());
  EXPECT_FALSE(orphan.publish(msg));
  EXPECT_EQ(orphan.dropped(), 1u);
}
