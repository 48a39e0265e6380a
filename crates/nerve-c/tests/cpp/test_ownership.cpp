// GoogleTest suite of the C++ API: ownership without copies. Shared samples kept past
// their callback (released with their last copy, bounded by the subscriber's
// max_borrowed), and client request loans written in place (sent once, dropped unsent,
// misuse refused).

#include "common.hpp"

#include <nerve/msgs/add_two_ints.hpp>
#include <nerve/msgs/bytes.hpp>
#include <nerve/msgs/cmd_vel.hpp>
#include <nerve/msgs/echo.hpp>

#include <thread>
#include <vector>

using namespace nerve_test;
using nerve::msgs::AddTwoInts;
using nerve::msgs::Bytes;
using nerve::msgs::CmdVel;
using nerve::msgs::Echo;
using nerve::msgs::Int;
using nerve::msgs::TwoInts;

namespace {

struct Own : ::testing::Test {
  nerve::Context ctx{options()};
  nerve::Node node{ctx, node_name("own")};
  nerve::Executor exec{ctx};

  /// Spins until `done()` or a generous number of rounds passed; whether done.
  template <class F>
  bool spin_until(F done, int rounds = 2000) {
    for (int i = 0; i < rounds && !done(); ++i) exec.spin_once(10ms);
    return done();
  }
};

void publish_bytes(nerve::Publisher<Bytes>& pub, std::uint64_t tag, std::size_t n) {
  Bytes h{};
  h.tag = tag;
  const std::vector<std::uint8_t> data(n, static_cast<std::uint8_t>(tag));
  pub.publish(h, data);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Shared samples
// ---------------------------------------------------------------------------------------

TEST_F(Own, SharedSamplesOutliveTheirCallback) {
  const std::string topic = unique("own_keep");
  nerve::Publisher<Bytes> pub(node, topic);
  nerve::Qos qos;
  qos.max_borrowed = 4;
  std::vector<nerve::SharedSample<Bytes>> kept;
  const std::size_t before = nerve_live_handles();
  exec.add(nerve::Subscriber<Bytes>(node, topic, qos), [&](nerve::SharedSample<Bytes> s) {
    EXPECT_EQ(s.use_count(), 1);
    kept.push_back(std::move(s));
  });
  for (std::uint64_t i = 1; i <= 3; ++i) publish_bytes(pub, i, i + 1);
  ASSERT_TRUE(spin_until([&] { return kept.size() == 3; }));

  // read after the callbacks returned: the payload is still the sample's, not a copy
  for (std::uint64_t i = 1; i <= 3; ++i) {
    const nerve::SharedSample<Bytes>& s = kept[i - 1];
    EXPECT_EQ(s->tag, i);
    ASSERT_EQ(s.elems().size(), i + 1);
    EXPECT_EQ(s.elems()[0], i);
    EXPECT_GE(s.seq(), 1u);
    EXPECT_NE(s.publisher_id(), 0u);
  }
  EXPECT_EQ(nerve_live_handles(), before + 3);  // each kept sample holds its handle

  // copies share the one sample; it is released with its last copy
  nerve::SharedSample<Bytes> copy = kept[0];
  EXPECT_EQ(copy.use_count(), 2);
  EXPECT_EQ(copy.get(), kept[0].get());
  EXPECT_EQ(static_cast<const void*>(copy.elems().data()), static_cast<const void*>(kept[0].elems().data()));
  kept.erase(kept.begin());
  EXPECT_EQ(copy.use_count(), 1);
  EXPECT_EQ(copy->tag, 1u);
  EXPECT_EQ(nerve_live_handles(), before + 3);
  copy.reset();
  EXPECT_FALSE(copy.valid());
  EXPECT_EQ(nerve_live_handles(), before + 2);
  kept.clear();
  EXPECT_EQ(nerve_live_handles(), before);
  try {
    (void)copy->tag;
    FAIL() << "an empty shared sample must throw";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_STALE_HANDLE);
  }
}

TEST_F(Own, SharedSamplesFromTakenSamples) {
  const std::string topic = unique("own_take");
  nerve::Publisher<CmdVel> pub(node, topic);
  nerve::Subscriber<CmdVel> sub(node, topic);
  CmdVel m{};
  m.linear = 2.5f;
  pub.publish(m);
  std::optional<nerve::Sample<CmdVel>> s = sub.take(5s);
  ASSERT_TRUE(s);
  const CmdVel* where = s->get();
  nerve::SharedSample<CmdVel> shared(std::move(*s));
  EXPECT_FALSE(s->valid());  // taken over
  EXPECT_EQ(shared.get(), where);
  EXPECT_EQ(shared->linear, 2.5f);
  // sharing an empty sample is an error, not a crash
  EXPECT_THROW(nerve::SharedSample<CmdVel>(std::move(*s)), nerve::Error);
}

TEST_F(Own, KeptSamplesAreBoundedByMaxBorrowed) {
  // the default QoS: a subscriber holds at most 2 samples; a third that arrives while
  // two are kept makes spin throw, and stays queued until one is released
  const std::string topic = unique("own_bound");
  nerve::Publisher<Bytes> pub(node, topic);
  std::vector<nerve::SharedSample<Bytes>> kept;
  exec.add(nerve::Subscriber<Bytes>(node, topic), [&](nerve::SharedSample<Bytes> s) { kept.push_back(s); });
  for (std::uint64_t i = 1; i <= 3; ++i) publish_bytes(pub, i, 1);
  std::string error;
  nerve_status_t code = NERVE_OK;
  for (int i = 0; i < 2000 && error.empty(); ++i) {
    try {
      exec.spin_once(10ms);
    } catch (const nerve::Error& e) {
      error = e.what();
      code = e.code();
    }
  }
  ASSERT_FALSE(error.empty()) << "a third kept sample must be refused";
  EXPECT_EQ(code, NERVE_ERR_EXEC);
  EXPECT_TRUE(contains(error, "already holds 2 samples")) << error;
  EXPECT_TRUE(contains(error, topic)) << error;
  ASSERT_EQ(kept.size(), 2u);
  // refused again while both are kept (no hang, no crash)
  EXPECT_THROW(exec.spin_once(10ms), nerve::Error);
  kept.erase(kept.begin());
  ASSERT_TRUE(spin_until([&] { return kept.size() == 2; }));
  EXPECT_EQ(kept[0]->tag, 2u);
  EXPECT_EQ(kept[1]->tag, 3u);  // delivered late, not lost
}

// ---------------------------------------------------------------------------------------
// Client loans
// ---------------------------------------------------------------------------------------

TEST_F(Own, LoanedRequestsReachTheServer) {
  const std::string name = unique("own_loan");
  nerve::Server<AddTwoInts> server(node, name);
  nerve::Client<AddTwoInts> client(node, name);
  ASSERT_TRUE(client.wait_for_service(5s));

  // a dropped loan sends nothing
  {
    nerve::RequestLoan<AddTwoInts> dropped = client.loan();
    dropped->a = 100;
  }
  nerve::RequestLoan<AddTwoInts> loan = client.loan();
  EXPECT_EQ(loan->a, 0);  // zeroed
  loan->a = 2;
  loan->b = 3;
  EXPECT_EQ(loan.size_bytes(), sizeof(TwoInts));
  nerve::Pending<AddTwoInts> p = client.send(std::move(loan));
  EXPECT_FALSE(loan.valid());
  auto req = server.take(5s);
  ASSERT_TRUE(req);
  EXPECT_EQ((*req)->a, 2);  // the first request is the sent loan, not the dropped one
  EXPECT_EQ((*req)->b, 3);
  Int sum{};
  sum.value = 5;
  req->reply(sum);
  EXPECT_EQ(p.wait()->value, 5);
  EXPECT_FALSE(server.take().has_value());

  // sending it again is an error (the loan was used up)
  try {
    (void)client.send(std::move(loan));
    FAIL() << "a sent loan cannot be sent again";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_STALE_HANDLE) << e.what();
  }
  EXPECT_THROW(loan->a = 1, nerve::Error);
  // elements for a type without a slice
  EXPECT_THROW((void)client.loan(3), nerve::Error);

  // a loan of another client is refused and stays usable
  nerve::Client<AddTwoInts> other(node, name);
  nerve::RequestLoan<AddTwoInts> theirs = other.loan();
  try {
    (void)client.send(std::move(theirs));
    FAIL() << "another client's loan must be refused";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_INVALID_ARGUMENT) << e.what();
  }
  EXPECT_TRUE(theirs.valid());
  theirs->a = 7;
  nerve::Pending<AddTwoInts> p2 = other.send(std::move(theirs));
  auto req2 = server.take(5s);
  ASSERT_TRUE(req2);
  EXPECT_EQ((*req2)->a, 7);
  sum.value = 7;
  req2->reply(sum);
  EXPECT_EQ(p2.wait()->value, 7);
}

TEST_F(Own, LoanedSliceRequestsAndCalls) {
  // a server on another thread (a multi-threaded executor) answers a loaned call
  const std::string name = unique("own_echo");
  nerve::MultiThreadedExecutor mt(1, options());
  mt.add(mt.group(nerve::CallbackGroup::MutuallyExclusive), [&](nerve::Context& c, nerve::Executor& e) {
    nerve::Node n(c, node_name("own_echo_server"));
    e.serve(nerve::Server<Echo>(n, name), 64,
            [](nerve::SampleRef<Bytes> req, nerve::ResponseWriter<Bytes>& out) {
              out->tag = req->tag + 1;
              auto el = out.elems(req.elems().size());
              for (std::size_t i = 0; i < el.size(); ++i) el[i] = static_cast<std::uint8_t>(req.elems()[i] + 1);
            });
  });
  std::thread spinning([&] { mt.spin(); });
  nerve::Client<Echo> client(node, name);
  ASSERT_TRUE(client.wait_for_service(60s));
  nerve::RequestLoan<Echo> loan = client.loan(4);
  loan->tag = 41;
  auto el = loan.elems();
  ASSERT_EQ(el.size(), 4u);
  for (std::size_t i = 0; i < el.size(); ++i) el[i] = static_cast<std::uint8_t>(10 * i);
  nerve::Reply<Echo> r = client.call(std::move(loan), 60s);
  EXPECT_EQ(r->tag, 42u);
  EXPECT_EQ(std::vector<std::uint8_t>(r.elems().begin(), r.elems().end()),
            (std::vector<std::uint8_t>{1, 11, 21, 31}));
  mt.stop();
  spinning.join();
}

TEST(OwnC, RequestLoanMisuseIsAnError) {
  nerve::Context ctx(options());
  nerve::Node node(ctx, node_name("own_c"));
  const std::string name = unique("own_c");
  nerve::Client<AddTwoInts> client(node, name);
  nerve::Server<AddTwoInts> server(node, name);

  nerve_request_loan_t loan{};
  void* data = nullptr;
  EXPECT_EQ(nerve_client_loan(client.handle(), 3, &loan, &data), NERVE_ERR_TYPE_MISMATCH);  // not a TwoInts
  EXPECT_TRUE(contains(nerve_last_error(), "3")) << nerve_last_error();
  EXPECT_EQ(nerve_client_loan(client.handle(), sizeof(TwoInts), nullptr, &data), NERVE_ERR_NULL);
  EXPECT_EQ(nerve_client_loan(nerve_client_t{}, sizeof(TwoInts), &loan, &data), NERVE_ERR_BAD_HANDLE);
  ASSERT_EQ(nerve_client_loan(client.handle(), sizeof(TwoInts), &loan, &data), NERVE_OK);
  ASSERT_NE(data, nullptr);
  TwoInts req{};
  req.a = 4;
  req.b = 5;
  std::memcpy(data, &req, sizeof req);
  nerve_pending_t pending{};
  ASSERT_EQ(nerve_client_send_loan(loan, &pending), NERVE_OK);
  nerve_pending_t again{};
  EXPECT_EQ(nerve_client_send_loan(loan, &again), NERVE_ERR_STALE_HANDLE);  // sent twice
  EXPECT_EQ(nerve_client_loan_discard(loan), NERVE_ERR_STALE_HANDLE);
  auto r = server.take(5s);
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)->a + (*r)->b, 9);
  r->fail("not now");
  EXPECT_EQ(nerve_pending_destroy(pending), NERVE_OK);

  // handles of another kind
  nerve::Publisher<CmdVel> pub(node, unique("own_c_pub"));
  nerve::Loan<CmdVel> pub_loan = pub.loan();
  EXPECT_EQ(nerve_client_send_loan(nerve_request_loan_t{pub_loan.handle().id}, &again), NERVE_ERR_WRONG_KIND);
  EXPECT_TRUE(contains(nerve_last_error(), "request loan")) << nerve_last_error();
  EXPECT_EQ(nerve_client_loan_discard(nerve_request_loan_t{client.handle().id}), NERVE_ERR_WRONG_KIND);
  ASSERT_EQ(nerve_client_loan(client.handle(), sizeof(TwoInts), &loan, &data), NERVE_OK);
  EXPECT_EQ(nerve_sample_send(nerve_loan_t{loan.id}), NERVE_ERR_WRONG_KIND);
  EXPECT_EQ(nerve_client_loan_discard(loan), NERVE_OK);  // dropped unsent
  EXPECT_FALSE(server.take().has_value());
}
