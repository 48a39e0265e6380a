// GoogleTest suite of the C++ API: hand-written message types (NERVE_MESSAGE), whose
// schema the C ABI seals at creation (nerve_schema_seal): their layout hash equals the
// equivalent Rust (generated) type's, and they interoperate on topics and services.

#include "common.hpp"

#include <nerve/message.hpp>
#include <nerve/msgs/header.hpp>
#include <nerve/msgs/int.hpp>
#include <nerve/msgs/two_ints.hpp>

namespace handwritten {
/// The same layout as nerve_msgs/TwoInts, written by hand.
struct TwoInts {
  std::int64_t a;
  std::int64_t b;
};
/// A type of its own.
struct Corner {
  float x;
  float y;
};
struct Pose2D {
  nerve::msgs::Header header;
  double x, y, theta;
  Corner corners[4];
};
/// A service of hand-written types.
struct Scale {};
}  // namespace handwritten

NERVE_MESSAGE(handwritten::TwoInts, "nerve_msgs/TwoInts", a, b);
NERVE_STRUCT(handwritten::Corner, x, y);
NERVE_MESSAGE(handwritten::Pose2D, "my_pkg/Pose2D", header, x, y, theta, corners);

template <>
struct nerve::service_traits<handwritten::Scale> {
  static constexpr std::string_view type_name = "my_pkg/Scale";
  using request = handwritten::Pose2D;
  using response = nerve::msgs::Int;
};

using namespace nerve_test;

namespace {
struct Msg : ::testing::Test {
  nerve::Context ctx{options()};
  nerve::Node node{ctx, node_name("message")};
};
}  // namespace

TEST(Seal, HandWrittenHashEqualsTheGenerated) {
  static_assert(!nerve::message_traits<handwritten::TwoInts>::sealed);
  const nerve::detail::sealed_schema& s = nerve::detail::schema_of<handwritten::TwoInts>();
  EXPECT_EQ(s.hash, nerve::message_traits<nerve::msgs::TwoInts>::layout_hash);
  EXPECT_TRUE(contains(s.text, "hash=b07a9dbcdc29505e")) << s.text;
  EXPECT_FALSE(contains(s.text, "hash=0000000000000000")) << s.text;
  // a malformed text is a schema error
  try {
    (void)nerve::detail::seal("nerve-schema/1|garbage");
    FAIL() << "a malformed schema must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_SCHEMA) << e.what();
  }
}

TEST_F(Msg, HandWrittenAndGeneratedShareATopic) {
  const std::string topic = unique("hand");
  nerve::Publisher<handwritten::TwoInts> pub(node, topic);
  nerve::Subscriber<nerve::msgs::TwoInts> sub(node, topic);
  handwritten::TwoInts m{};
  m.a = 3;
  m.b = -4;
  pub.publish(m);
  auto s = sub.take(5s);
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)->a, 3);
  EXPECT_EQ((*s)->b, -4);
}

TEST_F(Msg, NewTypesRoundTrip) {
  const std::string topic = unique("pose");
  nerve::Publisher<handwritten::Pose2D> pub(node, topic);
  nerve::Subscriber<handwritten::Pose2D> sub(node, topic);
  nerve::Loan<handwritten::Pose2D> l = pub.loan();
  l->x = 1.0;
  l->theta = 0.5;
  l->corners[3].y = 9.0f;
  ASSERT_TRUE(l->header.frame_id.assign("map"));
  pub.send(std::move(l));
  auto s = sub.take(5s);
  ASSERT_TRUE(s);
  EXPECT_EQ((*s)->theta, 0.5);
  EXPECT_EQ((*s)->corners[3].y, 9.0f);
  EXPECT_EQ((*s)->header.frame_id.view(), "map");
  // the type's identity: a generated type of another layout is refused on this topic
  try {
    nerve::Subscriber<nerve::msgs::TwoInts> wrong(node, topic);
    FAIL() << "a TwoInts subscriber on a Pose2D topic must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_TOPIC);
    EXPECT_TRUE(contains(e.what(), "my_pkg/Pose2D")) << e.what();
  }
}

TEST_F(Msg, HandWrittenServiceTypes) {
  const std::string name = unique("scale");
  nerve::Executor exec(ctx);
  exec.serve(nerve::Server<handwritten::Scale>(node, name), [](const handwritten::Pose2D& p) {
    nerve::msgs::Int out{};
    out.value = static_cast<std::int64_t>(p.x * 10);
    return out;
  });
  nerve::Client<handwritten::Scale> client(node, name);
  handwritten::Pose2D p{};
  p.x = 4.2;
  nerve::Pending<handwritten::Scale> call = client.send(p);
  std::optional<nerve::Reply<handwritten::Scale>> r;
  for (int i = 0; i < 2000 && !r; ++i) {
    exec.spin_once(10ms);
    r = call.wait(0ms);
  }
  ASSERT_TRUE(r);
  EXPECT_EQ((*r)->value, 42);
}
