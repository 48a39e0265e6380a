// GoogleTest suite of the C++ API: services. Clients and servers in one thread (send,
// take, reply, wait), an executor's server with clients on this and another thread,
// servers on another thread, failures (the server's exception or fail(), a dropped
// request, no server), slice requests and responses.

#include "common.hpp"

#include <nerve/msgs/add_two_ints.hpp>
#include <nerve/msgs/echo.hpp>
#include <nerve/msgs/trigger.hpp>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

using namespace nerve_test;
using nerve::msgs::AddTwoInts;
using nerve::msgs::Bytes;
using nerve::msgs::Echo;
using nerve::msgs::Int;
using nerve::msgs::Outcome;
using nerve::msgs::Trigger;
using nerve::msgs::TwoInts;

namespace {

struct Svc : ::testing::Test {
  nerve::Context ctx{options()};
  nerve::Node node{ctx, node_name("svc")};
  nerve::Executor exec{ctx};

  /// Spins the executor until `p` has its reply (or error); the result.
  template <class S>
  nerve::Result<nerve::Reply<S>> spin_for_reply(nerve::Pending<S>& p) {
    for (int i = 0; i < 2000; ++i) {
      exec.spin_once(10ms);
      auto r = p.try_take();
      if (!r.is_nothing()) return r;
    }
    return p.try_wait(5s);
  }
};

TwoInts two(std::int64_t a, std::int64_t b) {
  TwoInts t{};
  t.a = a;
  t.b = b;
  return t;
}

}  // namespace

TEST_F(Svc, SendTakeReplyInOneThread) {
  const std::string name = unique("add");
  nerve::Server<AddTwoInts> server(node, name);
  nerve::Client<AddTwoInts> client(node, name);
  EXPECT_TRUE(client.wait_for_service(5s));

  nerve::Pending<AddTwoInts> p = client.send(two(2, 3));
  EXPECT_TRUE(p.valid());
  auto early = p.try_take();
  EXPECT_TRUE(early.is_nothing());  // no reply yet: not an error
  EXPECT_FALSE(p.wait(0ms).has_value());

  std::optional<nerve::Request<AddTwoInts>> req = server.take(5s);
  ASSERT_TRUE(req);
  EXPECT_EQ((*req)->a, 2);
  EXPECT_EQ((**req).b, 3);
  EXPECT_GE(req->seq(), 1u);
  Int sum{};
  sum.value = (*req)->a + (*req)->b;
  req->reply(sum);
  EXPECT_FALSE(req->valid());  // answered: used up
  EXPECT_THROW(req->reply(sum), nerve::Error);

  std::optional<nerve::Reply<AddTwoInts>> rep = p.wait(5s);
  ASSERT_TRUE(rep);
  EXPECT_EQ((*rep)->value, 5);
  EXPECT_FALSE(p.valid());  // the call is over
  EXPECT_EQ(p.try_take().code(), NERVE_ERR_STALE_HANDLE);

  // try_reply, and a reply read after its client is gone
  nerve::Pending<AddTwoInts> p2 = client.send(two(10, 20));
  auto req2 = server.try_take(5s);
  ASSERT_TRUE(req2.ok()) << req2.error_message();
  sum.value = 30;
  EXPECT_TRUE(req2->try_reply(sum).ok());
  EXPECT_EQ(req2->try_reply(sum).code(), NERVE_ERR_STALE_HANDLE);
  nerve::Reply<AddTwoInts> r2 = p2.wait();
  { nerve::Client<AddTwoInts> gone = std::move(client); }
  EXPECT_EQ(r2->value, 30);
  EXPECT_FALSE(server.take().has_value());
}

TEST_F(Svc, FailAndDropReachTheCaller) {
  const std::string name = unique("fail");
  nerve::Server<AddTwoInts> server(node, name);
  nerve::Client<AddTwoInts> client(node, name);

  nerve::Pending<AddTwoInts> p = client.send(two(1, 1));
  auto req = server.take(5s);
  ASSERT_TRUE(req);
  req->fail("numbers too small");
  try {
    (void)p.wait(5s);
    FAIL() << "a failed request must fail the call";
  } catch (const nerve::HandlerFailed& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_HANDLER_FAILED) << e.what();
    EXPECT_TRUE(contains(e.what(), "numbers too small")) << e.what();
  }
  EXPECT_FALSE(p.valid());

  nerve::Pending<AddTwoInts> p2 = client.send(two(1, 1));
  {
    auto dropped = server.take(5s);
    ASSERT_TRUE(dropped);
  }  // released unanswered
  auto r = p2.try_wait(5s);
  EXPECT_EQ(r.code(), NERVE_ERR_REJECTED);
  EXPECT_TRUE(contains(r.error_message(), "dropped")) << r.error_message();

  // a forgotten call: the late reply is dropped, nothing breaks
  {
    nerve::Pending<AddTwoInts> forgotten = client.send(two(4, 4));
  }
  auto late = server.take(5s);
  ASSERT_TRUE(late);
  Int v{};
  late->reply(v);
}

TEST_F(Svc, NoServer) {
  nerve::Client<AddTwoInts> client(node, unique("nobody"));
  EXPECT_FALSE(client.wait_for_service(1ms));
  try {
    (void)client.call(two(1, 2), 20ms);
    FAIL() << "a call without a server must fail";
  } catch (const nerve::NoServer& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_NO_SERVER) << e.what();
    EXPECT_TRUE(contains(e.what(), "no server")) << e.what();
  }
  auto r = client.try_call(two(1, 2), 20ms);
  EXPECT_EQ(r.code(), NERVE_ERR_NO_SERVER);
  EXPECT_FALSE(r.error_message().empty());
}

TEST_F(Svc, CallTimesOutWhenNobodyAnswers) {
  const std::string name = unique("silent");
  nerve::Server<AddTwoInts> server(node, name);  // never takes
  nerve::Client<AddTwoInts> client(node, name);
  try {
    (void)client.call(two(1, 2), 20ms);
    FAIL() << "an unanswered call must time out";
  } catch (const nerve::Timeout& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_TIMEOUT) << e.what();
  }
  EXPECT_EQ(client.try_call(two(1, 2), 1ms).code(), NERVE_ERR_TIMEOUT);
}

TEST_F(Svc, ExecutorServerAnswersPendingCalls) {
  const std::string name = unique("exec_add");
  int served = 0;
  nerve::Server<AddTwoInts> server(node, name);
  exec.serve(std::move(server), [&](const TwoInts& req) {
    ++served;
    Int out{};
    out.value = req.a + req.b;
    return out;
  });
  EXPECT_FALSE(static_cast<bool>(server));  // the executor owns it now
  nerve::Client<AddTwoInts> client = node.client<AddTwoInts>(name);
  for (int i = 0; i < 3; ++i) {
    nerve::Pending<AddTwoInts> p = client.send(two(i, 100));
    auto r = spin_for_reply(p);
    ASSERT_TRUE(r.ok()) << r.error_message();
    EXPECT_EQ(r->get()->value, i + 100);
  }
  EXPECT_EQ(served, 3);
}

TEST_F(Svc, ServerCallbackExceptionBecomesTheCallersError) {
  const std::string name = unique("exec_throw");
  exec.serve(nerve::Server<AddTwoInts>(node, name), [](nerve::SampleRef<TwoInts> req) -> Int {
    if (req->a < 0) throw std::invalid_argument("negative operand");
    Int out{};
    out.value = req->a;
    return out;
  });
  nerve::Client<AddTwoInts> client(node, name);
  nerve::Pending<AddTwoInts> bad = client.send(two(-1, 0));
  auto r = spin_for_reply(bad);  // the spin itself does not throw
  ASSERT_TRUE(r.is_error());
  EXPECT_EQ(r.code(), NERVE_ERR_HANDLER_FAILED) << r.error_message();
  EXPECT_TRUE(contains(r.error_message(), "negative operand")) << r.error_message();
  // the server goes on
  nerve::Pending<AddTwoInts> good = client.send(two(7, 0));
  auto ok = spin_for_reply(good);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(ok->get()->value, 7);
}

TEST_F(Svc, SliceRequestsAndResponses) {
  const std::string name = unique("echo");
  exec.serve(nerve::Server<Echo>(node, name), 64,
             [](nerve::SampleRef<Bytes> req, nerve::ResponseWriter<Bytes>& out) {
               out->tag = req->tag + 1;
               auto e = out.elems(req.elems().size());
               for (std::size_t i = 0; i < e.size(); ++i) e[i] = static_cast<std::uint8_t>(req.elems()[i] * 2);
             });
  nerve::Client<Echo> client(node, name);
  Bytes head{};
  head.tag = 9;
  const std::vector<std::uint8_t> data{1, 2, 3, 4};
  nerve::Pending<Echo> p = client.send(head, data);
  auto r = spin_for_reply(p);
  ASSERT_TRUE(r.ok()) << r.error_message();
  EXPECT_EQ((*r)->tag, 10u);
  ASSERT_EQ(r->elems().size(), 4u);
  EXPECT_EQ(r->elems()[3], 8);

  // a response larger than the writer's capacity fails that call
  const std::vector<std::uint8_t> big(100, 1);
  nerve::Pending<Echo> p2 = client.send(head, big);
  auto r2 = spin_for_reply(p2);
  ASSERT_TRUE(r2.is_error());
  EXPECT_TRUE(contains(r2.error_message(), "at most 64 elements")) << r2.error_message();
}

TEST_F(Svc, ManualSliceReply) {
  const std::string name = unique("echo_manual");
  nerve::Server<Echo> server(node, name);
  nerve::Client<Echo> client(node, name);
  Bytes head{};
  head.tag = 1;
  const std::vector<std::uint8_t> data{5, 6};
  nerve::Pending<Echo> p = client.send(head, data);
  auto req = server.take(5s);
  ASSERT_TRUE(req);
  EXPECT_EQ(req->elems().size(), 2u);
  const std::vector<std::uint8_t> back{7, 8, 9};
  req->reply(**req, back);
  auto rep = p.wait(5s);
  ASSERT_TRUE(rep);
  EXPECT_EQ((*rep)->tag, 1u);
  EXPECT_EQ(std::vector<std::uint8_t>(rep->elems().begin(), rep->elems().end()), back);
}

TEST_F(Svc, EmptyRequestsAndFixedStringResponses) {
  const std::string name = unique("trigger");
  exec.serve(nerve::Server<Trigger>(node, name), [](const nerve::msgs::Empty&) {
    Outcome o{};
    o.success = 1;
    o.message.assign("done");
    return o;
  });
  nerve::Client<Trigger> client(node, name);
  nerve::Pending<Trigger> p = client.send(nerve::msgs::Empty{});
  auto r = spin_for_reply(p);
  ASSERT_TRUE(r.ok()) << r.error_message();
  EXPECT_EQ((*r)->success, 1);
  EXPECT_EQ((*r)->message.view(), "done");
}

TEST_F(Svc, ServiceTypeMismatchAndSecondServerAreRefused) {
  const std::string name = unique("mismatch");
  nerve::Server<AddTwoInts> server(node, name);
  try {
    nerve::Client<Echo> wrong(node, name);
    FAIL() << "a client of another service type must be refused";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_SERVICE);
    EXPECT_TRUE(contains(e.what(), "nerve_msgs/AddTwoInts")) << e.what();
    EXPECT_TRUE(contains(e.what(), "nerve_msgs/Echo")) << e.what();
  }
  try {
    nerve::Server<AddTwoInts> second(node, name);
    FAIL() << "a second server of one service must be refused";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_SERVICE) << e.what();
  }
}

TEST_F(Svc, ServerGoneFailsCallsInFlight) {
  const std::string name = unique("gone");
  auto server = std::make_unique<nerve::Server<AddTwoInts>>(node, name);
  nerve::Client<AddTwoInts> client(node, name);
  nerve::Pending<AddTwoInts> p = client.send(two(1, 2));
  server.reset();
  auto r = p.try_wait(30s);
  EXPECT_EQ(r.code(), NERVE_ERR_SERVER_GONE) << r.error_message();
}

// ---------------------------------------------------------------------------------------
// Both ways across threads: each thread has its own context
// ---------------------------------------------------------------------------------------

TEST_F(Svc, ThisThreadServesAnotherThreadCalls) {
  const std::string name = unique("cross_in");
  exec.serve(nerve::Server<AddTwoInts>(node, name), [](const TwoInts& r) {
    Int out{};
    out.value = r.a * r.b;
    return out;
  });
  std::atomic<bool> done{false};
  std::vector<std::int64_t> results;
  std::string error;
  std::thread caller([&] {
    try {
      nerve::Context c(options());
      nerve::Node n(c, node_name("caller"));
      nerve::Client<AddTwoInts> client(n, name);
      if (!client.wait_for_service(30s)) throw std::runtime_error("no service");
      for (int i = 1; i <= 3; ++i) results.push_back(client.call(two(i, 10), 30s)->value);
    } catch (const std::exception& e) {
      error = e.what();
    }
    done = true;
  });
  for (int i = 0; i < 100000 && !done; ++i) exec.spin_once(10ms);
  caller.join();
  EXPECT_EQ(error, "");
  EXPECT_EQ(results, (std::vector<std::int64_t>{10, 20, 30}));
}

TEST_F(Svc, AnotherThreadServesThisThreadCalls) {
  const std::string name = unique("cross_out");
  std::atomic<bool> stop{false};
  std::atomic<bool> ready{false};
  std::thread serving([&] {
    nerve::Context c(options());
    nerve::Node n(c, node_name("server"));
    nerve::Executor e(c);
    e.serve(nerve::Server<AddTwoInts>(n, name), [](const TwoInts& r) {
      Int out{};
      out.value = r.a - r.b;
      return out;
    });
    ready = true;
    while (!stop) e.spin_once(10ms);
  });
  while (!ready) std::this_thread::yield();
  nerve::Client<AddTwoInts> client(node, name);
  ASSERT_TRUE(client.wait_for_service(30s));
  for (int i = 0; i < 3; ++i) {
    nerve::Reply<AddTwoInts> r = client.call(two(100, i), 30s);
    EXPECT_EQ(r->value, 100 - i);
    auto t = client.try_call(two(5, i), 30s);
    ASSERT_TRUE(t.ok()) << t.error_message();
    EXPECT_EQ((*t)->value, 5 - i);
  }
  stop = true;
  serving.join();
}
