// GoogleTest suite of the C++ API: actions. Sending a goal waits for the server to
// accept it, so each test runs its action server on a second thread (with its own
// context) and the client on the test's thread.

#include "common.hpp"

#include <nerve/msgs/echo_action.hpp>
#include <nerve/msgs/fibonacci.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

using namespace nerve_test;
using nerve::msgs::Bytes;
using nerve::msgs::EchoAction;
using nerve::msgs::Fibonacci;
using nerve::msgs::FibonacciGoal;
using nerve::msgs::FibonacciSequence;

namespace {

/// An action server of A on its own thread: `decide` (may be empty) decides on new
/// goals, `run` handles each accepted goal to its end.
template <class A>
class ServerThread {
 public:
  using Decide = std::function<bool(const typename nerve::action_traits<A>::goal&)>;
  using Run = std::function<void(nerve::ServerGoal<A>&, nerve::ActionServer<A>&)>;

  ServerThread(std::string name, Decide decide, Run run, nerve::GoalPolicy policy = NERVE_GOAL_QUEUE)
      : thread_([this, name, decide, run, policy] {
          try {
            nerve::Context ctx(options());
            nerve::Node node(ctx, node_name("action_server"));
            nerve::ActionServer<A> server(node, name, policy, 8);
            ready_ = true;
            while (!stop_) {
              if (decide) {
                server.spin_once(5ms, [&](const typename nerve::action_traits<A>::goal& g) { return decide(g); });
              } else {
                server.spin_once(5ms);
              }
              while (auto g = server.take_goal()) {
                {
                  std::lock_guard<std::mutex> lock(mu_);
                  ids_.push_back(g->id());
                }
                run(*g, server);
              }
            }
          } catch (const std::exception& e) {
            std::lock_guard<std::mutex> lock(mu_);
            error_ = e.what();
            ready_ = true;
          }
        }) {
    while (!ready_) std::this_thread::yield();
  }
  ~ServerThread() {
    stop_ = true;
    thread_.join();
  }
  /// The ids of the goals the server took.
  std::vector<std::string> ids() {
    std::lock_guard<std::mutex> lock(mu_);
    return ids_;
  }
  /// The server thread's exception, if any.
  std::string error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  std::atomic<bool> ready_{false}, stop_{false};
  std::mutex mu_;
  std::vector<std::string> ids_;
  std::string error_;
  std::thread thread_;
};

struct Act : ::testing::Test {
  nerve::Context ctx{options()};
  nerve::Node node{ctx, node_name("action_client")};
};

FibonacciGoal order(std::int64_t n) {
  FibonacciGoal g{};
  g.order = n;
  return g;
}

/// Serves Fibonacci: feedback with the sequence so far, then the whole sequence.
void fibonacci(nerve::ServerGoal<Fibonacci>& g, nerve::ActionServer<Fibonacci>&) {
  std::vector<std::int64_t> seq{0, 1};
  while (static_cast<std::int64_t>(seq.size()) < g->order) {
    seq.push_back(seq[seq.size() - 1] + seq[seq.size() - 2]);
    FibonacciSequence f{};
    f.len = seq.size();
    g.send_feedback(f, seq);
  }
  FibonacciSequence r{};
  r.len = seq.size();
  g.succeed(r, seq);
}

}  // namespace

TEST_F(Act, GoalFeedbackResult) {
  const std::string name = unique("fib");
  ServerThread<Fibonacci> server(name, {}, fibonacci);
  ASSERT_EQ(server.error(), "");
  nerve::ActionClient<Fibonacci> client(node, name);
  ASSERT_TRUE(client.wait_for_server(30s));

  nerve::Goal<Fibonacci> goal = client.send_goal(order(10));
  EXPECT_FALSE(goal.id().empty());
  std::optional<nerve::GoalResult<Fibonacci>> r = goal.result(60s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, NERVE_GOAL_SUCCEEDED);
  EXPECT_TRUE(nerve::is_terminal(r->state));
  EXPECT_EQ(r->result->len, 10u);
  ASSERT_EQ(r->result.elems().size(), 10u);
  EXPECT_EQ(r->result.elems()[9], 34);

  // feedback came before the result, in order: growing sequences, each consistent
  std::vector<std::size_t> lengths;
  while (auto f = goal.try_feedback()) {
    EXPECT_EQ((*f)->len, f->elems().size());
    lengths.push_back(f->elems().size());
  }
  for (std::size_t i = 1; i < lengths.size(); ++i) EXPECT_GT(lengths[i], lengths[i - 1]);
  EXPECT_LE(lengths.size(), 8u);

  EXPECT_EQ(server.ids(), std::vector<std::string>{goal.id()});
}

TEST_F(Act, RejectedGoalsFailWithTheReason) {
  const std::string name = unique("fib_reject");
  ServerThread<Fibonacci> server(
      name,
      [](const FibonacciGoal& g) {
        if (g.order > 1000) throw std::invalid_argument("order too large");
        return g.order >= 0;
      },
      fibonacci);
  nerve::ActionClient<Fibonacci> client(node, name);
  ASSERT_TRUE(client.wait_for_server(30s));
  try {
    (void)client.send_goal(order(-1));
    FAIL() << "a rejected goal must throw";
  } catch (const nerve::Rejected& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_REJECTED) << e.what();
    EXPECT_TRUE(contains(e.what(), "rejected")) << e.what();
  }
  try {
    (void)client.send_goal(order(5000));
    FAIL() << "a rejected goal must throw";
  } catch (const nerve::Rejected& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_REJECTED) << e.what();
    EXPECT_TRUE(contains(e.what(), "order too large")) << e.what();
  }
  // an accepted one still works
  nerve::Goal<Fibonacci> ok = client.send_goal(order(3));
  auto r = ok.result(60s);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, NERVE_GOAL_SUCCEEDED);
  EXPECT_EQ(server.ids().size(), 1u);
}

TEST_F(Act, CancelAndAbort) {
  const std::string name = unique("echo_cancel");
  ServerThread<EchoAction> server(name, {}, [](nerve::ServerGoal<EchoAction>& g, nerve::ActionServer<EchoAction>& s) {
    Bytes out{};
    out.tag = g->tag;
    if (g->tag == 1) {  // abort at once
      g.abort(out);
      return;
    }
    // wait (answering requests) until the client cancels
    for (int i = 0; i < 6000 && !g.is_canceling(); ++i) s.spin_once(5ms);
    g.canceled(out);
  });
  nerve::ActionClient<EchoAction> client(node, name);
  ASSERT_TRUE(client.wait_for_server(30s));

  Bytes head{};
  head.tag = 1;
  const std::vector<std::uint8_t> data{1, 2, 3};
  nerve::Goal<EchoAction> aborted = client.send_goal(head, data);
  auto ra = aborted.result(60s);
  ASSERT_TRUE(ra);
  EXPECT_EQ(ra->state, NERVE_GOAL_ABORTED);
  EXPECT_EQ(ra->result->tag, 1u);

  head.tag = 2;
  nerve::Goal<EchoAction> goal = client.send_goal(head, data);
  EXPECT_FALSE(goal.result(1ms).has_value());  // still running
  const nerve::GoalState after = goal.cancel();
  EXPECT_TRUE(after == NERVE_GOAL_CANCELING || after == NERVE_GOAL_CANCELED) << after;
  auto rc = goal.result(60s);
  ASSERT_TRUE(rc);
  EXPECT_EQ(rc->state, NERVE_GOAL_CANCELED);
  EXPECT_EQ(rc->result->tag, 2u);
  EXPECT_EQ(server.error(), "");
}

TEST_F(Act, UnknownActionTypeAndMovedFrom) {
  // the C ABI knows the built-in action types by name only
  nerve_action_client_t c{};
  EXPECT_EQ(nerve_action_client_create(node.handle(), unique("x").c_str(), "my_pkg/Unknown", &c),
            NERVE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(nerve_last_error(), "my_pkg/Unknown")) << nerve_last_error();
  nerve::ActionClient<Fibonacci> client(node, unique("nobody"));
  EXPECT_FALSE(client.wait_for_server(1ms));
  nerve::ActionClient<Fibonacci> moved = std::move(client);
  EXPECT_THROW(client.send_goal(order(1)), nerve::Error);  // NOLINT
  nerve::Goal<Fibonacci> none;
  EXPECT_THROW((void)none.id(), nerve::Error);
  EXPECT_THROW((void)none.cancel(), nerve::Error);
}

TEST_F(Act, AServerGoneWithAnActiveGoalIsServerGone) {
  const std::string name = unique("fib_gone");
  auto server = std::make_unique<ServerThread<Fibonacci>>(
      name, ServerThread<Fibonacci>::Decide{},
      [](nerve::ServerGoal<Fibonacci>&, nerve::ActionServer<Fibonacci>&) {});  // never ends it
  nerve::ActionClient<Fibonacci> client(node, name);
  ASSERT_TRUE(client.wait_for_server(30s));
  nerve::Goal<Fibonacci> goal = client.send_goal(order(5));
  server.reset();  // the server goes away with the goal active
  try {
    (void)goal.result(60s);
    FAIL() << "the goal's result must fail when its server goes away";
  } catch (const nerve::ServerGone& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_SERVER_GONE) << e.what();
  }
}
