// GoogleTest suite of typed errors (issue 45): each kind of failed call is produced for
// real, caught as its C++ class (a nerve::CallError, nerve::Timeout or nerve::TooLarge,
// all nerve::Error), and carries the C code a C caller gets for it; the noexcept try_*
// forms report the same code.

#include "common.hpp"

#include <nerve/msgs/add_two_ints.hpp>
#include <nerve/msgs/cmd_vel.hpp>
#include <nerve/msgs/echo.hpp>
#include <nerve/msgs/fibonacci.hpp>
#include <nerve/msgs/fibonacci_goal.hpp>
#include <nerve/msgs/int.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

using namespace nerve_test;
using nerve::msgs::AddTwoInts;
using nerve::msgs::Bytes;
using nerve::msgs::Echo;
using nerve::msgs::TwoInts;

namespace {

struct Errors : ::testing::Test {
  nerve::Context ctx{options()};
  nerve::Node node{ctx, node_name("errors")};
};

TwoInts two(std::int64_t a, std::int64_t b) {
  TwoInts t{};
  t.a = a;
  t.b = b;
  return t;
}

}  // namespace

// the hierarchy: every kind is a nerve::Error; the call kinds are nerve::CallErrors
static_assert(std::is_base_of_v<nerve::Error, nerve::CallError>);
static_assert(std::is_base_of_v<nerve::CallError, nerve::NoServer>);
static_assert(std::is_base_of_v<nerve::CallError, nerve::ServerGone>);
static_assert(std::is_base_of_v<nerve::CallError, nerve::HandlerFailed>);
static_assert(std::is_base_of_v<nerve::CallError, nerve::TooManyInFlight>);
static_assert(std::is_base_of_v<nerve::CallError, nerve::Rejected>);
static_assert(std::is_base_of_v<nerve::CallError, nerve::Malformed>);
static_assert(std::is_base_of_v<nerve::Error, nerve::Timeout>);
static_assert(std::is_base_of_v<nerve::Error, nerve::TooLarge>);

TEST(ErrorCodes, NewCodesAreAppendedAndNamed) {
  // the numbers C programs compiled against stay where they were
  EXPECT_EQ(static_cast<int>(NERVE_ERR_CALL), 17);
  EXPECT_EQ(static_cast<int>(NERVE_ERR_SERVER_GONE), 18);
  EXPECT_EQ(static_cast<int>(NERVE_ERR_TIMEOUT), 27);
  EXPECT_EQ(static_cast<int>(NERVE_ERR_PANIC), 28);
  EXPECT_STREQ(nerve::status_name(NERVE_ERR_NO_SERVER), "NERVE_ERR_NO_SERVER");
  EXPECT_STREQ(nerve::status_name(NERVE_ERR_HANDLER_FAILED), "NERVE_ERR_HANDLER_FAILED");
  EXPECT_STREQ(nerve::status_name(NERVE_ERR_TOO_LARGE), "NERVE_ERR_TOO_LARGE");
  EXPECT_STREQ(nerve::status_name(NERVE_ERR_TOO_MANY_IN_FLIGHT), "NERVE_ERR_TOO_MANY_IN_FLIGHT");
  EXPECT_STREQ(nerve::status_name(NERVE_ERR_REJECTED), "NERVE_ERR_REJECTED");
  EXPECT_STREQ(nerve::status_name(NERVE_ERR_MALFORMED), "NERVE_ERR_MALFORMED");
  EXPECT_STREQ(nerve_status_name(1000), "(unknown status)");
}

TEST_F(Errors, NoServerIsNoServer) {
  nerve::Client<AddTwoInts> client(node, unique("nobody"));
  try {
    (void)client.call(two(1, 2), 1s);
    FAIL() << "a call without a server must fail";
  } catch (const nerve::NoServer& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_NO_SERVER);
    EXPECT_TRUE(contains(e.what(), "no server")) << e.what();
  }
  // caught as the base class too
  try {
    (void)client.call(two(1, 2), 1s);
    FAIL();
  } catch (const nerve::CallError& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_NO_SERVER);
  }
  EXPECT_EQ(client.try_call(two(1, 2), 1s).code(), NERVE_ERR_NO_SERVER);
  // the C door says the same
  nerve_reply_t reply{};
  nerve_sample_view_t view{};
  const TwoInts req = two(1, 2);
  EXPECT_EQ(nerve_client_call(client.handle(), &req, sizeof req, 1000000000, &reply, &view),
            NERVE_ERR_NO_SERVER);
}

TEST_F(Errors, AFailingHandlerIsHandlerFailed) {
  const std::string name = unique("failing");
  nerve::Server<AddTwoInts> server(node, name);
  nerve::Client<AddTwoInts> client(node, name);
  nerve::Pending<AddTwoInts> p = client.send(two(1, 1));
  auto req = server.take(5s);
  ASSERT_TRUE(req);
  req->fail("the numbers are too small");
  try {
    (void)p.wait(5s);
    FAIL() << "a failed handler must fail the call";
  } catch (const nerve::HandlerFailed& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_HANDLER_FAILED);
    EXPECT_TRUE(contains(e.what(), "the numbers are too small")) << e.what();
  }

  // an executor's server whose callback throws: the same kind
  nerve::Executor exec(ctx);
  const std::string thrower = unique("throwing");
  exec.serve(nerve::Server<AddTwoInts>(node, thrower), [](const TwoInts&) -> nerve::msgs::Int {
    throw std::runtime_error("no such sum");
  });
  nerve::Client<AddTwoInts> c2(node, thrower);
  nerve::Pending<AddTwoInts> p2 = c2.send(two(1, 1));
  nerve::Result<nerve::Reply<AddTwoInts>> r = p2.try_take();
  for (int i = 0; i < 2000 && r.is_nothing(); ++i) {
    exec.spin_once(10ms);
    r = p2.try_take();
  }
  EXPECT_EQ(r.code(), NERVE_ERR_HANDLER_FAILED) << r.error_message();
  EXPECT_TRUE(contains(r.error_message(), "no such sum")) << r.error_message();
  try {
    r.check();
    FAIL() << "check() throws the typed error";
  } catch (const nerve::HandlerFailed& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_HANDLER_FAILED);
  }
}

TEST_F(Errors, AServerThatGoesAwayWithTheRequestIsServerGone) {
  const std::string name = unique("leaving");
  auto server = std::make_unique<nerve::Server<AddTwoInts>>(node, name);
  nerve::Client<AddTwoInts> client(node, name);
  nerve::Pending<AddTwoInts> p = client.send(two(1, 2));
  server.reset();  // gone with the request unanswered
  try {
    (void)p.wait(30s);
    FAIL() << "the call must fail when its server goes away";
  } catch (const nerve::ServerGone& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_SERVER_GONE);
  }
}

TEST_F(Errors, AServerThatNeverAnswersIsTimeout) {
  const std::string name = unique("silent");
  nerve::Server<AddTwoInts> server(node, name);  // never takes
  nerve::Client<AddTwoInts> client(node, name);
  try {
    (void)client.call(two(1, 2), 20ms);
    FAIL() << "an unanswered call must time out";
  } catch (const nerve::Timeout& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_TIMEOUT);
  }
  EXPECT_EQ(client.try_call(two(1, 2), 1ms).code(), NERVE_ERR_TIMEOUT);
}

TEST_F(Errors, ARequestOverMaxRequestIsTooLarge) {
  const std::string name = unique("small");
  nerve::Server<Echo> server(node, name, 64);
  nerve::Client<Echo> client(node, name, 64);  // requests and responses of 64 bytes at most
  Bytes head{};
  const std::vector<std::uint8_t> big(1000, 7);
  try {
    (void)client.send(head, big);
    FAIL() << "a request over max_request must be refused";
  } catch (const nerve::TooLarge& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_TOO_LARGE);
    EXPECT_TRUE(contains(e.what(), "64")) << e.what();
  }
  // a small one still goes through
  const std::vector<std::uint8_t> small{1, 2};
  nerve::Pending<Echo> p = client.send(head, small);
  auto req = server.take(5s);
  ASSERT_TRUE(req);
  req->reply(**req, small);
  EXPECT_TRUE(p.wait(5s));
}

TEST_F(Errors, ATopicPayloadOverMaxPayloadIsTooLargeToo) {
  nerve::Qos qos;
  qos.max_payload = 64;
  nerve::Publisher<Bytes> pub(node, unique("bytes"), qos);
  Bytes head{};
  const std::vector<std::uint8_t> big(1000, 7);
  try {
    pub.publish(head, big);
    FAIL() << "a payload over max_payload must be refused";
  } catch (const nerve::TooLarge& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_TOO_LARGE);
  }
  EXPECT_EQ(pub.try_publish(head, big).code(), NERVE_ERR_TOO_LARGE);
}

TEST_F(Errors, MoreCallsThanMaxInFlightIsTooManyInFlight) {
  const std::string name = unique("busy");
  nerve::Server<AddTwoInts> server(node, name);  // never takes
  nerve::Client<AddTwoInts> client(node, name);
  std::vector<nerve::Pending<AddTwoInts>> calls;
  // ServiceQos::max_in_flight is 8 by default: the ninth call is refused, nothing sent
  bool refused = false;
  for (int i = 0; i < 64 && !refused; ++i) {
    try {
      calls.push_back(client.send(two(i, i)));
    } catch (const nerve::TooManyInFlight& e) {
      EXPECT_EQ(e.code(), NERVE_ERR_TOO_MANY_IN_FLIGHT);
      EXPECT_TRUE(contains(e.what(), "max_in_flight")) << e.what();
      refused = true;
    }
  }
  EXPECT_TRUE(refused);
  EXPECT_EQ(calls.size(), 8u);
  // the C door says the same
  nerve_pending_t pending{};
  const TwoInts req = two(1, 1);
  EXPECT_EQ(nerve_client_send(client.handle(), &req, sizeof req, &pending), NERVE_ERR_TOO_MANY_IN_FLIGHT);
  // a call forgotten and one answered: the rest go on
  calls.erase(calls.begin());
  auto taken = server.take(5s);
  ASSERT_TRUE(taken);
  taken->reply(nerve::msgs::Int{});
}

TEST_F(Errors, AnActionGoalWithoutAServerIsNoServer) {
  nerve::ActionClient<nerve::msgs::Fibonacci> client(node, unique("no_fib"));
  nerve::msgs::FibonacciGoal g{};
  g.order = 3;
  try {
    (void)client.send_goal(g);
    FAIL() << "a goal without a server must fail";
  } catch (const nerve::NoServer& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_NO_SERVER);
  }
}
