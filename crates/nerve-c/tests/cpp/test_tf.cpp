// GoogleTest suite of the C++ transforms API (nerve/tf.hpp): lookups through a chain
// with interpolation, bad input refused with the frames named, a buffer shared by
// threads while another inserts, broadcasters reaching a listener thread. No timing
// bounds.

#include "common.hpp"

#include <nerve/tf.hpp>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

using namespace nerve_test;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t S = 1000000000;

nerve::tf::Transform at(double x, double y, double z) {
  nerve::tf::Transform t;
  t.translation = {x, y, z};
  return t;
}

/// map -> odom -> base_link (dynamic, 0..1 s at 10 Hz), base_link -> lidar (static).
nerve::tf::Buffer robot() {
  nerve::tf::Buffer b;
  b.set_transform("base_link", "lidar", 0, at(0.2, 0.0, 0.5), true);
  for (int k = 0; k <= 10; ++k) {
    b.set_transform("odom", "base_link", k * S / 10, at(k * 0.1, 0.0, 0.0));
    b.set_transform("map", "odom", k * S / 10, at(1.0, 2.0, 0.0));
  }
  return b;
}

TEST(Tf, LookupsGoThroughTheChainAndInterpolate) {
  const auto b = robot();
  const auto t = b.lookup_transform("map", "lidar", S / 2);
  EXPECT_NEAR(t.translation[0], 1.7, 1e-9);
  EXPECT_NEAR(t.translation[1], 2.0, 1e-9);
  EXPECT_NEAR(t.translation[2], 0.5, 1e-9);
  const auto latest = b.lookup_transform("map", "base_link");
  EXPECT_NEAR(latest.translation[0], 2.0, 1e-9);
  EXPECT_TRUE(b.can_transform("lidar", "map", S / 4));
  EXPECT_FALSE(b.can_transform("map", "lidar", 2 * S));
  // a yaw of 90 degrees moves x onto y
  nerve::tf::Buffer y;
  nerve::tf::Transform yaw;
  yaw.rotation = {0.0, 0.0, std::sqrt(0.5), std::sqrt(0.5)};
  y.set_transform("a", "b", 0, yaw, true);
  const auto p = y.lookup_transform("a", "b").apply({1.0, 0.0, 0.0});
  EXPECT_NEAR(p[0], 0.0, 1e-12);
  EXPECT_NEAR(p[1], 1.0, 1e-12);
  std::vector<std::array<double, 3>> pts{{1.0, 0.0, 0.0}, {0.0, 0.0, 2.0}};
  y.lookup_transform("a", "b").apply_in_place(pts);
  EXPECT_NEAR(pts[0][1], 1.0, 1e-12);
  EXPECT_NEAR(pts[1][2], 2.0, 1e-12);
}

TEST(Tf, BadInputIsRefusedNamingTheFrames) {
  auto b = robot();
  nerve::tf::Transform nan;
  nan.rotation = {std::nan(""), 0.0, 0.0, 1.0};
  try {
    b.set_transform("base_link", "imu", 0, nan);
    FAIL() << "a NaN rotation was stored";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("base_link -> imu"), std::string::npos) << e.what();
  }
  try {
    b.lookup_transform("map", "nowhere");
    FAIL() << "an unknown frame was found";
  } catch (const nerve::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown frame \"nowhere\""), std::string::npos)
        << e.what();
  }
  try {
    b.lookup_transform("map", "base_link", 2 * S);
    FAIL() << "extrapolated";
  } catch (const nerve::Error& e) {
    EXPECT_NE(std::string(e.what()).find("future"), std::string::npos) << e.what();
  }
  try {
    b.wait_for_transform("map", "nowhere", nerve::tf::LATEST, 10ms);
    FAIL() << "waited for nothing";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_TIMEOUT);
  }
  // through the C ABI: a null buffer is an error, not a crash
  nerve_tf_transform_t out{};
  EXPECT_EQ(nerve_tf_buffer_lookup(nullptr, "a", "b", NERVE_TF_LATEST, &out), NERVE_ERR_NULL);
  EXPECT_EQ(nerve_tf_buffer_release(nullptr), NERVE_OK);
}

TEST(Tf, ThreadsLookUpWhileAnotherInserts) {
  nerve::tf::Buffer b;
  b.set_transform("root", "a", 0, at(0, 0, 0));
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i) {
    readers.emplace_back([b, &stop, &torn] {  // each reader holds its own reference
      while (!stop.load()) {
        const auto t = b.lookup_transform("root", "a");
        if (t.translation[1] != 2 * t.translation[0] || t.translation[2] != 3 * t.translation[0])
          torn.fetch_add(1);
      }
    });
  }
  for (int k = 1; k < 5000; ++k) b.set_transform("root", "a", k * 1000, at(k, 2.0 * k, 3.0 * k));
  stop.store(true);
  for (auto& r : readers) r.join();
  EXPECT_EQ(torn.load(), 0);
}

TEST(Tf, BroadcastersReachAListenerThread) {
  nerve::Context ctx{options()};
  nerve::Node node{ctx, node_name("tf_robot")};
  nerve::tf::StaticBroadcaster statics{node};
  nerve::tf::Listener listener{ctx, node_name("tf_listener")};
  // sent after the listener joined: a send hands the latched transforms to new subscribers
  statics.send({{"base_link", "lidar", 0, at(0.2, 0.0, 0.5)}});
  nerve::tf::Broadcaster dynamic{node};
  for (int k = 0; k <= 10; ++k) {
    dynamic.send({{"odom", "base_link", k * S / 10, at(k, 0.0, 0.0)}});
  }
  const auto t = listener.buffer().wait_for_transform("odom", "lidar", S, 20s);
  EXPECT_NEAR(t.translation[0], 10.2, 1e-9);
  EXPECT_NEAR(t.translation[2], 0.5, 1e-9);
  try {
    dynamic.send({{"base_link", std::string(70, 'x'), 0, at(0, 0, 0)}});
    FAIL() << "a 70-byte frame name was sent";
  } catch (const nerve::Error& e) {
    EXPECT_NE(std::string(e.what()).find("longer than 64 bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
