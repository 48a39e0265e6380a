// GoogleTest suite of the C++ API (nerve.hpp): contexts, nodes, QoS, publishers and
// loans, subscribers and samples, errors and results, spans and durations, and the
// error paths through the C ABI (null, released, wrong-thread and wrong-kind handles).
// No test asserts a timing bound: only orderings and counts.

#include "common.hpp"

#include <nerve/msgs/bytes.hpp>
#include <nerve/msgs/cmd_vel.hpp>
#include <nerve/msgs/empty.hpp>
#include <nerve/msgs/fibonacci_sequence.hpp>
#include <nerve/msgs/image.hpp>
#include <nerve/msgs/twist.hpp>

#include <array>
#include <thread>
#include <vector>

using namespace nerve_test;
using nerve::msgs::Bytes;
using nerve::msgs::CmdVel;
using nerve::msgs::Empty;
using nerve::msgs::FibonacciSequence;
using nerve::msgs::Image;
using nerve::msgs::Twist;

namespace {

/// A context and a node of this test process.
struct Fixture : ::testing::Test {
  nerve::Context ctx{options()};
  nerve::Node node{ctx, node_name("api")};
};

/// Takes the next sample, waiting a bounded while (the sample is normally queued
/// already: publishing in-process is synchronous).
template <class T>
std::optional<nerve::Sample<T>> next(nerve::Subscriber<T>& sub) {
  return sub.take(5s);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Errors, results, spans, durations
// ---------------------------------------------------------------------------------------

TEST(Error, CarriesCodeAndStatusName) {
  const nerve::Error e(NERVE_ERR_TOPIC, "topic /x is busy");
  EXPECT_EQ(e.code(), NERVE_ERR_TOPIC);
  EXPECT_STREQ(e.what(), "NERVE_ERR_TOPIC: topic /x is busy");
  EXPECT_STREQ(nerve::status_name(NERVE_ERR_STALE_HANDLE), "NERVE_ERR_STALE_HANDLE");
  EXPECT_STREQ(nerve_status_name(9999), "(unknown status)");
  // an nerve::Error is a std::runtime_error
  const std::runtime_error& base = e;
  EXPECT_TRUE(contains(base.what(), "busy"));
}

TEST(Result, ValueNothingAndError) {
  using R = nerve::Result<int>;
  R ok(5);
  EXPECT_TRUE(ok.ok());
  EXPECT_TRUE(static_cast<bool>(ok));
  EXPECT_FALSE(ok.is_error());
  EXPECT_EQ(ok.code(), NERVE_OK);
  EXPECT_EQ(ok.value(), 5);
  EXPECT_EQ(*ok, 5);
  EXPECT_TRUE(ok.error_message().empty());

  R none = nerve::detail::ResultAccess::nothing<R>();
  EXPECT_FALSE(none.ok());
  EXPECT_TRUE(none.is_nothing());
  EXPECT_FALSE(none.is_error());
  EXPECT_EQ(none.code(), NERVE_NOTHING);
  try {
    (void)none.value();
    FAIL() << "value() of nothing must throw";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_NOTHING);
  }

  R err = nerve::detail::ResultAccess::error<R>(NERVE_ERR_LOAN, "pool exhausted");
  EXPECT_FALSE(err.ok());
  EXPECT_TRUE(err.is_error());
  EXPECT_EQ(err.code(), NERVE_ERR_LOAN);
  EXPECT_EQ(err.error_message(), "pool exhausted");
  try {
    (void)err.value();
    FAIL() << "value() of an error must throw";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_LOAN);
    EXPECT_STREQ(e.what(), "NERVE_ERR_LOAN: pool exhausted");
  }

  nerve::Result<void> v;
  EXPECT_TRUE(v.ok());
  EXPECT_NO_THROW(v.value());
  auto verr = nerve::detail::ResultAccess::error<nerve::Result<void>>(NERVE_ERR_PUBLISH, "no");
  EXPECT_TRUE(verr.is_error());
  EXPECT_THROW(verr.check(), nerve::Error);
}

TEST(Span, ViewsContiguousElements) {
  std::vector<int> v{1, 2, 3, 4};
  nerve::span<int> s(v);
  EXPECT_EQ(s.size(), 4u);
  EXPECT_EQ(s.size_bytes(), 4 * sizeof(int));
  EXPECT_EQ(s[2], 3);
  s[2] = 9;
  EXPECT_EQ(v[2], 9);
  nerve::span<const int> c = s;
  int sum = 0;
  for (int x : c) sum += x;
  EXPECT_EQ(sum, 1 + 2 + 9 + 4);
  EXPECT_EQ(c.subspan(1, 2).size(), 2u);
  EXPECT_EQ(c.subspan(1).front(), 2);
  EXPECT_EQ(c.first(1).back(), 1);
  EXPECT_EQ(c.last(1).front(), 4);
  int a[3] = {7, 8, 9};
  nerve::span<int> sa(a);
  EXPECT_EQ(sa.size(), 3u);
  EXPECT_TRUE(nerve::span<int>().empty());
}

TEST(Durations, TimeoutsSaturateAndMapForever) {
  using nerve::detail::timeout_i64;
  using nerve::detail::timeout_u64;
  EXPECT_EQ(timeout_i64(0ms), 0);
  EXPECT_EQ(timeout_i64(2ms), 2000000);
  EXPECT_EQ(timeout_i64(-1s), -1);
  EXPECT_EQ(timeout_i64(nerve::forever), -1);
  EXPECT_EQ(timeout_i64(std::chrono::hours::max()), -1);
  EXPECT_EQ(timeout_i64(std::chrono::duration<double>(0.5)), 500000000);
  EXPECT_EQ(timeout_u64(-5s), 0u);
  EXPECT_EQ(timeout_u64(3us), 3000u);
  EXPECT_EQ(timeout_u64(std::chrono::hours::max()),
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
}

TEST(Layout, PayloadSizes) {
  using LB = nerve::detail::layout<Bytes>;
  static_assert(LB::has_slice);
  static_assert(LB::elems_offset == 8);
  std::size_t b = 0;
  EXPECT_TRUE(LB::bytes(5, b));
  EXPECT_EQ(b, 13u);
  EXPECT_FALSE(LB::bytes(std::numeric_limits<std::size_t>::max(), b));
  using LE = nerve::detail::layout<Empty>;
  static_assert(!LE::has_slice && LE::head_size == 0);
  using LC = nerve::detail::layout<CmdVel>;
  static_assert(LC::head_size == sizeof(CmdVel));
}

// ---------------------------------------------------------------------------------------
// Context, node, QoS
// ---------------------------------------------------------------------------------------

TEST(Context, OptionsApply) {
  nerve::Context ctx(options());
  EXPECT_TRUE(static_cast<bool>(ctx));
  EXPECT_EQ(ctx.domain(), *options().domain);
  nerve::Context moved(std::move(ctx));
  EXPECT_FALSE(static_cast<bool>(ctx));  // NOLINT: moved-from is checked on purpose
  EXPECT_EQ(moved.domain(), *options().domain);
  // a moved-from context names a null handle: an error, not a crash
  try {
    (void)ctx.domain();  // NOLINT
    FAIL() << "a moved-from context must throw";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_BAD_HANDLE);
    EXPECT_TRUE(contains(e.what(), "NERVE_ERR_BAD_HANDLE: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "context")) << e.what();
  }
}

TEST(Context, BadDomainIsAnError) {
  nerve::ContextOptions o = options();
  o.domain = 100000;
  try {
    nerve::Context ctx(o);
    FAIL() << "domain 100000 must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_CONTEXT);
    EXPECT_TRUE(contains(e.what(), "NERVE_ERR_CONTEXT: ")) << e.what();
  }
  nerve::ContextOptions bad = options();
  bad.config_path = state_dir() + "/no-such-config.toml";
  EXPECT_THROW(nerve::Context{bad}, nerve::Error);
}

TEST_F(Fixture, NodeNameAndBadNames) {
  const std::string n = node_name("named");
  nerve::Node a(ctx, n);
  EXPECT_TRUE(contains(a.name(), n)) << a.name();
  for (const char* bad : {"", "bad name", "a/../b"}) {
    try {
      nerve::Node b(ctx, bad);
      ADD_FAILURE() << "node name '" << bad << "' must fail";
    } catch (const nerve::Error& e) {
      EXPECT_EQ(e.code(), NERVE_ERR_NODE) << e.what();
    }
  }
  // a long name goes through the growing buffer
  const std::string long_name = node_name(std::string(50, 'x'));
  nerve::Node l(ctx, long_name);
  EXPECT_TRUE(contains(l.name(), long_name)) << l.name();
}

TEST(Qos, PresetsAndFields) {
  const nerve::Qos d;
  EXPECT_EQ(d.depth, 4u);
  EXPECT_FALSE(d.back_pressure);
  const nerve::Qos r = nerve::Qos::reliable();
  EXPECT_TRUE(r.back_pressure);
  EXPECT_GT(r.timeout.count(), 0);
  const nerve::Qos l = nerve::Qos::latched();
  EXPECT_GE(l.history, 1u);
  const nerve::Qos s = nerve::Qos::sensor();
  EXPECT_FALSE(s.back_pressure);
  nerve::Qos q;
  q.depth = 9;
  q.max_loans = 3;
  q.timeout = 5ms;
  const nerve_qos_t c = q.to_c();
  EXPECT_EQ(c.depth, 9u);
  EXPECT_EQ(c.max_loans, 3u);
  EXPECT_EQ(c.timeout_ns, 5000000u);
  EXPECT_EQ(nerve::Qos(c).depth, 9u);
}

TEST_F(Fixture, ZeroDepthQosIsRejected) {
  nerve::Qos q;
  q.depth = 0;
  try {
    nerve::Publisher<CmdVel> p(node, unique("qos0"), q);
    FAIL() << "depth 0 must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(e.what(), "depth")) << e.what();
  }
}

// ---------------------------------------------------------------------------------------
// Publishing and taking
// ---------------------------------------------------------------------------------------

TEST_F(Fixture, LoanSendTake) {
  const std::string topic = unique("cmd");
  nerve::Publisher<CmdVel> pub(node, topic);
  nerve::Subscriber<CmdVel> sub(node, topic);
  EXPECT_TRUE(pub.wait_for_subscribers(1, 5s));
  EXPECT_EQ(pub.subscriber_count(), 1u);
  EXPECT_EQ(sub.publisher_count(), 1u);

  for (int i = 1; i <= 3; ++i) {
    nerve::Loan<CmdVel> loan = pub.loan();
    EXPECT_TRUE(loan.valid());
    EXPECT_EQ(loan->linear, 0.0f);  // the head is zeroed
    EXPECT_EQ(loan.size_bytes(), sizeof(CmdVel));
    loan->linear = 0.5f * static_cast<float>(i);
    (*loan).angular = -1.0f;
    loan->stamp.nanos = i;
    pub.send(std::move(loan));
    EXPECT_FALSE(loan.valid());  // NOLINT: moved-from is checked on purpose
  }
  std::uint64_t publisher = 0;
  for (int i = 1; i <= 3; ++i) {
    auto s = next(sub);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ((*s)->linear, 0.5f * static_cast<float>(i));
    EXPECT_EQ((**s).angular, -1.0f);
    EXPECT_EQ((*s)->stamp.nanos, i);
    EXPECT_EQ(s->seq(), static_cast<std::uint64_t>(i));
    EXPECT_GT(s->stamp_ns(), 0u);
    EXPECT_GT(s->wall_ns(), 0);
    EXPECT_EQ(s->size_bytes(), sizeof(CmdVel));
    if (i == 1) publisher = s->publisher_id();
    EXPECT_EQ(s->publisher_id(), publisher);
  }
  EXPECT_FALSE(sub.take().has_value());
  const nerve_subscriber_stats_t st = sub.stats();
  EXPECT_EQ(st.received, 3u);
  EXPECT_EQ(st.lost, 0u);
}

TEST_F(Fixture, PublishCopiesAndTryForms) {
  const std::string topic = unique("copy");
  nerve::Publisher<CmdVel> pub = node.publisher<CmdVel>(topic);
  nerve::Subscriber<CmdVel> sub = node.subscriber<CmdVel>(topic);
  CmdVel m{};
  m.linear = 2.0f;
  pub.publish(m);
  m.linear = 3.0f;
  EXPECT_TRUE(pub.try_publish(m).ok());
  auto r = pub.try_loan();
  ASSERT_TRUE(r.ok()) << r.error_message();
  r->get()->linear = 4.0f;
  EXPECT_TRUE(pub.try_send(std::move(*r)).ok());

  for (float want : {2.0f, 3.0f, 4.0f}) {
    auto t = sub.try_take(5s);
    ASSERT_TRUE(t.ok()) << t.error_message();
    EXPECT_EQ(t->get()->linear, want);  // the Sample's ref
    EXPECT_EQ((*t)->linear, want);
  }
  auto none = sub.try_take();
  EXPECT_FALSE(none.ok());
  EXPECT_TRUE(none.is_nothing());
  EXPECT_FALSE(none.is_error());
  EXPECT_TRUE(none.error_message().empty());
  // a take with a timeout and nothing published comes back empty
  EXPECT_FALSE(sub.take(1ms).has_value());
}

TEST_F(Fixture, SliceMessages) {
  const std::string topic = unique("bytes");
  nerve::Publisher<Bytes> pub(node, topic);
  nerve::Subscriber<Bytes> sub(node, topic);

  nerve::Loan<Bytes> loan = pub.loan(5);
  EXPECT_EQ(loan.size_bytes(), 8u + 5u);
  ASSERT_EQ(loan.elems().size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) loan.elems()[i] = static_cast<std::uint8_t>(10 + i);
  loan->tag = 77;
  loan.send();

  const std::vector<std::uint8_t> data{1, 2, 3};
  Bytes head{};
  head.tag = 78;
  pub.publish(head, data);
  pub.publish(head);  // a slice type with no elements
  EXPECT_TRUE(pub.try_publish(head, data).ok());

  auto a = next(sub);
  ASSERT_TRUE(a);
  EXPECT_EQ((*a)->tag, 77u);
  ASSERT_EQ(a->elems().size(), 5u);
  EXPECT_EQ(a->elems()[4], 14);
  auto b = next(sub);
  ASSERT_TRUE(b);
  EXPECT_EQ((*b)->tag, 78u);
  EXPECT_EQ(std::vector<std::uint8_t>(b->elems().begin(), b->elems().end()), data);
  auto c = next(sub);
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->elems().empty());
  EXPECT_EQ(c->size_bytes(), 8u);
  auto d = next(sub);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->elems().size(), 3u);

  // an element count on a type without a slice is refused
  nerve::Publisher<CmdVel> plain(node, unique("plain"));
  auto bad = plain.try_loan(3);
  EXPECT_TRUE(bad.is_error());
  EXPECT_EQ(bad.code(), NERVE_ERR_INVALID_ARGUMENT);
  // so is a count whose payload size overflows
  auto huge = pub.try_loan(std::numeric_limits<std::size_t>::max());
  EXPECT_EQ(huge.code(), NERVE_ERR_INVALID_ARGUMENT);
}

TEST_F(Fixture, WideSliceElements) {
  const std::string topic = unique("fib");
  nerve::Publisher<FibonacciSequence> pub(node, topic);
  nerve::Subscriber<FibonacciSequence> sub(node, topic);
  const std::array<std::int64_t, 6> fib{0, 1, 1, 2, 3, 5};
  FibonacciSequence head{};
  head.len = fib.size();
  pub.publish(head, fib);
  auto s = next(sub);
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)->len, 6u);
  ASSERT_EQ(s->elems().size(), 6u);
  EXPECT_EQ(s->elems()[5], 5);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(s->elems().data()) % alignof(std::int64_t), 0u);
}

TEST_F(Fixture, ImageWithHeaderAndFixedStrings) {
  const std::string topic = unique("image");
  nerve::Publisher<Image> pub(node, topic);
  nerve::Subscriber<Image> sub(node, topic);
  nerve::Loan<Image> loan = pub.loan(4 * 2 * 3);
  loan->width = 4;
  loan->height = 2;
  loan->step = 12;
  ASSERT_TRUE(loan->encoding.assign("rgb8"));
  ASSERT_TRUE(loan->header.frame_id.assign("camera"));
  for (auto& px : loan.elems()) px = 200;
  pub.send(std::move(loan));
  auto s = next(sub);
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)->encoding.view(), "rgb8");
  EXPECT_EQ((*s)->header.frame_id.view(), "camera");
  EXPECT_EQ(s->elems().size(), 24u);
  EXPECT_EQ(s->elems()[23], 200);
}

TEST_F(Fixture, EmptyMessages) {
  const std::string topic = unique("empty");
  nerve::Publisher<Empty> pub(node, topic);
  nerve::Subscriber<Empty> sub(node, topic);
  pub.publish(Empty{});
  nerve::Loan<Empty> l = pub.loan();
  EXPECT_EQ(l.size_bytes(), 0u);
  l.send();
  auto a = next(sub);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->size_bytes(), 0u);
  EXPECT_EQ(a->seq(), 1u);
  auto b = next(sub);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->seq(), 2u);
}

// ---------------------------------------------------------------------------------------
// Loans: misuse is an error, never undefined behaviour
// ---------------------------------------------------------------------------------------

TEST_F(Fixture, LoanUsedAfterSendThrows) {
  const std::string topic = unique("stale_loan");
  nerve::Publisher<CmdVel> pub(node, topic);
  nerve::Loan<CmdVel> loan = pub.loan();
  loan.send();
  EXPECT_FALSE(loan.valid());
  try {
    loan->linear = 1.0f;
    FAIL() << "writing a sent loan must throw";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_STALE_HANDLE);
    EXPECT_TRUE(contains(e.what(), "loan")) << e.what();
    EXPECT_TRUE(contains(e.what(), "nerve_msgs/CmdVel")) << e.what();
  }
  EXPECT_THROW(*loan, nerve::Error);
  EXPECT_THROW(loan.send(), nerve::Error);
  EXPECT_THROW(pub.send(std::move(loan)), nerve::Error);
  auto r = loan.try_send();
  EXPECT_EQ(r.code(), NERVE_ERR_STALE_HANDLE);
  EXPECT_TRUE(contains(r.error_message(), "no longer valid")) << r.error_message();
  EXPECT_EQ(pub.try_send(std::move(loan)).code(), NERVE_ERR_STALE_HANDLE);

  nerve::Loan<CmdVel> a = pub.loan();
  nerve::Loan<CmdVel> b = std::move(a);
  EXPECT_THROW(a->linear = 1.0f, nerve::Error);  // NOLINT: moved-from on purpose
  EXPECT_NO_THROW(b->linear = 1.0f);
  nerve::Loan<Bytes> empty;
  EXPECT_THROW(empty.elems(), nerve::Error);
  EXPECT_EQ(empty.size_bytes(), 0u);
}

TEST_F(Fixture, SentLoanHandleIsStaleInTheCApi) {
  nerve::Publisher<CmdVel> pub(node, unique("c_loan"));
  nerve::Loan<CmdVel> loan = pub.loan();
  const nerve_loan_t raw = loan.handle();
  loan.send();
  EXPECT_EQ(nerve_sample_send(raw), NERVE_ERR_STALE_HANDLE);
  EXPECT_TRUE(contains(nerve_last_error(), "no longer valid")) << nerve_last_error();
  EXPECT_EQ(nerve_loan_discard(raw), NERVE_ERR_STALE_HANDLE);
}

TEST_F(Fixture, LoanOfAnotherPublisherIsRefused) {
  const std::string topic = unique("two_pubs");
  nerve::Publisher<CmdVel> a(node, topic);
  nerve::Publisher<CmdVel> b(node, topic);
  nerve::Loan<CmdVel> loan = a.loan();
  try {
    b.send(std::move(loan));
    FAIL() << "a loan of another publisher must be refused";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_INVALID_ARGUMENT);
  }
  EXPECT_TRUE(loan.valid());  // still held: nothing was sent
  EXPECT_EQ(b.try_send(std::move(loan)).code(), NERVE_ERR_INVALID_ARGUMENT);
  EXPECT_NO_THROW(a.send(std::move(loan)));
}

TEST_F(Fixture, DroppedLoansAreDiscarded) {
  const std::string topic = unique("pool");
  nerve::Publisher<CmdVel> pub(node, topic);
  nerve::Subscriber<CmdVel> sub(node, topic);
  const std::size_t before = nerve::live_handles();
  for (int i = 0; i < 50; ++i) {
    nerve::Loan<CmdVel> a = pub.loan();
    nerve::Loan<CmdVel> b = pub.loan();
    EXPECT_EQ(nerve::live_handles(), before + 2);
    b.discard();
    EXPECT_FALSE(b.valid());
    EXPECT_THROW(b->linear = 1.0f, nerve::Error);
  }  // `a` destroyed unsent: discarded
  EXPECT_EQ(nerve::live_handles(), before);
  EXPECT_FALSE(sub.take().has_value());  // nothing was sent
  nerve::Loan<CmdVel> reused = pub.loan();
  reused = pub.loan();  // move-assigning discards the held loan
  EXPECT_EQ(nerve::live_handles(), before + 1);
}

// ---------------------------------------------------------------------------------------
// Samples
// ---------------------------------------------------------------------------------------

TEST_F(Fixture, SampleOutlivesItsSubscriberAndPublisher) {
  const std::string topic = unique("outlive");
  std::optional<nerve::Sample<Bytes>> kept;
  {
    nerve::Publisher<Bytes> pub(node, topic);
    nerve::Subscriber<Bytes> sub(node, topic);
    const std::vector<std::uint8_t> data(100, 0xAB);
    Bytes h{};
    h.tag = 4242;
    pub.publish(h, data);
    kept = next(sub);
    ASSERT_TRUE(kept);
  }  // subscriber, publisher gone
  // the ABI keeps the memory alive: still readable, and intact
  EXPECT_EQ((*kept)->tag, 4242u);
  ASSERT_EQ(kept->elems().size(), 100u);
  for (std::uint8_t b : kept->elems()) ASSERT_EQ(b, 0xAB);
  kept.reset();
}

TEST_F(Fixture, ReleasedOrMovedSampleThrows) {
  const std::string topic = unique("released");
  nerve::Publisher<CmdVel> pub(node, topic);
  nerve::Subscriber<CmdVel> sub(node, topic);
  pub.publish(CmdVel{});
  auto s = next(sub);
  ASSERT_TRUE(s);
  nerve::Sample<CmdVel> moved = std::move(*s);
  EXPECT_FALSE(s->valid());
  try {
    (void)(*s)->linear;
    FAIL() << "a moved-from sample must throw";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_STALE_HANDLE);
    EXPECT_TRUE(contains(e.what(), "sample of nerve_msgs/CmdVel")) << e.what();
  }
  EXPECT_NO_THROW((void)moved->linear);
  moved.reset();
  EXPECT_THROW((void)moved.seq(), nerve::Error);
  EXPECT_THROW((void)moved.ref(), nerve::Error);
}

TEST_F(Fixture, DoubleReleaseThroughTheCApiIsStale) {
  const std::string topic = unique("double");
  nerve::Publisher<CmdVel> pub(node, topic);
  nerve::Subscriber<CmdVel> sub(node, topic);
  pub.publish(CmdVel{});
  auto s = next(sub);
  ASSERT_TRUE(s);
  const nerve_sample_t raw = s->release();  // the C caller owns it now
  EXPECT_FALSE(s->valid());
  nerve_sample_view_t v{};
  EXPECT_EQ(nerve_sample_view(raw, &v), NERVE_OK);
  EXPECT_EQ(v.len, sizeof(CmdVel));
  EXPECT_EQ(nerve_sample_release(raw), NERVE_OK);
  EXPECT_EQ(nerve_sample_release(raw), NERVE_ERR_STALE_HANDLE);
  EXPECT_TRUE(contains(nerve_last_error(), "sample handle is no longer valid")) << nerve_last_error();
  EXPECT_EQ(nerve_sample_view(raw, &v), NERVE_ERR_STALE_HANDLE);

  // null, wrong kind
  EXPECT_EQ(nerve_sample_release(nerve_sample_t{}), NERVE_ERR_BAD_HANDLE);
  EXPECT_TRUE(contains(nerve_last_error(), "null")) << nerve_last_error();
  nerve_publisher_t as_pub{};
  as_pub.id = sub.handle().id;  // a subscriber handle passed as a publisher
  std::size_t n = 0;
  EXPECT_EQ(nerve_publisher_subscriber_count(as_pub, &n), NERVE_ERR_WRONG_KIND);
  EXPECT_TRUE(contains(nerve_last_error(), "subscriber handle")) << nerve_last_error();
  EXPECT_EQ(nerve_publisher_subscriber_count(pub.handle(), nullptr), NERVE_ERR_NULL);
  // a node destroyed twice
  nerve_node_t nd{};
  ASSERT_EQ(nerve_node_create(ctx.handle(), node_name("twice").c_str(), &nd), NERVE_OK);
  EXPECT_EQ(nerve_node_destroy(nd), NERVE_OK);
  EXPECT_EQ(nerve_node_destroy(nd), NERVE_ERR_STALE_HANDLE);
}

TEST_F(Fixture, MovedFromObjectsThrowBadHandle) {
  const std::string topic = unique("moved");
  nerve::Publisher<CmdVel> pub(node, topic);
  nerve::Publisher<CmdVel> pub2(std::move(pub));
  EXPECT_FALSE(static_cast<bool>(pub));  // NOLINT
  EXPECT_TRUE(static_cast<bool>(pub2));
  try {
    pub.publish(CmdVel{});  // NOLINT
    FAIL() << "a moved-from publisher must throw";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_BAD_HANDLE);
    EXPECT_TRUE(contains(e.what(), "publisher handle is null")) << e.what();
  }
  EXPECT_THROW(pub.loan(), nerve::Error);           // NOLINT
  EXPECT_THROW(pub.subscriber_count(), nerve::Error);  // NOLINT
  EXPECT_EQ(pub.try_loan().code(), NERVE_ERR_BAD_HANDLE);  // NOLINT

  nerve::Subscriber<CmdVel> sub(node, topic);
  nerve::Subscriber<CmdVel> sub2 = std::move(sub);
  EXPECT_THROW(sub.take(), nerve::Error);  // NOLINT
  EXPECT_EQ(sub.try_take().code(), NERVE_ERR_BAD_HANDLE);  // NOLINT
  pub2.publish(CmdVel{});
  EXPECT_TRUE(sub2.take(5s).has_value());

  nerve::Node gone = std::move(node);
  EXPECT_THROW(nerve::Publisher<CmdVel>(node, unique("x")), nerve::Error);  // NOLINT
  EXPECT_THROW((void)node.name(), nerve::Error);  // NOLINT
  node = std::move(gone);
}

TEST_F(Fixture, HandleUsedOnAnotherThreadIsWrongThread) {
  const std::string topic = unique("thread");
  nerve::Publisher<CmdVel> pub(node, topic);
  nerve::Subscriber<CmdVel> sub(node, topic);
  nerve_status_t count_code = NERVE_OK, publish_code = NERVE_OK, take_code = NERVE_OK;
  std::string what;
  std::thread t([&] {
    try {
      (void)pub.subscriber_count();
    } catch (const nerve::Error& e) {
      count_code = e.code();
      what = e.what();
    }
    publish_code = pub.try_publish(CmdVel{}).code();
    take_code = sub.try_take().code();
  });
  t.join();
  EXPECT_EQ(count_code, NERVE_ERR_WRONG_THREAD);
  EXPECT_TRUE(contains(what, "belongs to thread")) << what;
  EXPECT_EQ(publish_code, NERVE_ERR_WRONG_THREAD);
  EXPECT_EQ(take_code, NERVE_ERR_WRONG_THREAD);
  // still fine on this thread
  EXPECT_EQ(pub.subscriber_count(), 1u);
}

TEST_F(Fixture, ContextsOnTwoThreadsTalk) {
  const std::string topic = unique("threads");
  nerve::Subscriber<CmdVel> sub(node, topic);
  std::thread t([&] {
    nerve::Context c2(options());
    nerve::Node n2(c2, node_name("other_thread"));
    nerve::Publisher<CmdVel> pub(n2, topic);
    pub.wait_for_subscribers(1, 10s);
    CmdVel m{};
    m.linear = 9.0f;
    pub.publish(m);
  });
  auto s = sub.take(30s);
  t.join();
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)->linear, 9.0f);
}

// ---------------------------------------------------------------------------------------
// Topic types
// ---------------------------------------------------------------------------------------

TEST_F(Fixture, WrongTypeForATopicNamesBothTypes) {
  const std::string topic = unique("typed");
  nerve::Publisher<CmdVel> pub(node, topic);
  try {
    nerve::Subscriber<Twist> sub(node, topic);
    FAIL() << "a Twist subscriber on a CmdVel topic must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_TOPIC);
    EXPECT_TRUE(contains(e.what(), "nerve_msgs/CmdVel")) << e.what();
    EXPECT_TRUE(contains(e.what(), "nerve_msgs/Twist")) << e.what();
  }
  try {
    nerve::Publisher<Twist> p2(node, topic);
    FAIL() << "a Twist publisher on a CmdVel topic must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_TOPIC);
    EXPECT_TRUE(contains(e.what(), "nerve_msgs/CmdVel")) << e.what();
    EXPECT_TRUE(contains(e.what(), "nerve_msgs/Twist")) << e.what();
  }
}

TEST_F(Fixture, LayoutHashMismatchNamesBothHashes) {
  const std::string schema(nerve::message_traits<CmdVel>::schema_text);
  const std::uint64_t wrong = nerve::message_traits<CmdVel>::layout_hash ^ 1;
  nerve_publisher_t p{};
  ASSERT_EQ(nerve_publisher_create(node.handle(), unique("hash").c_str(), schema.c_str(), wrong,
                                   nullptr, &p),
            NERVE_ERR_TYPE_MISMATCH);
  const std::string msg = nerve_last_error();
  EXPECT_TRUE(contains(msg, "nerve_msgs/CmdVel")) << msg;
  EXPECT_TRUE(contains(msg, "b2b8f7092626b0d0")) << msg;
  EXPECT_TRUE(contains(msg, "b2b8f7092626b0d1")) << msg;
  // a malformed schema
  EXPECT_EQ(nerve_publisher_create(node.handle(), unique("hash").c_str(), "nonsense", 0, nullptr, &p),
            NERVE_ERR_SCHEMA);
}

// ---------------------------------------------------------------------------------------
// Leaks
// ---------------------------------------------------------------------------------------

TEST(Handles, EverythingIsReleased) {
  const std::size_t before = nerve::live_handles();
  {
    nerve::Context ctx(options());
    nerve::Node node(ctx, node_name("leak"));
    const std::string topic = unique("leak");
    nerve::Publisher<Bytes> pub(node, topic);
    nerve::Subscriber<Bytes> sub(node, topic);
    auto l = pub.loan(3);
    pub.send(std::move(l));
    auto s = sub.take(5s);
    ASSERT_TRUE(s);
    auto unsent = pub.loan(1);
    EXPECT_GE(nerve::live_handles(), before + 6);
  }
  EXPECT_EQ(nerve::live_handles(), before);
}
