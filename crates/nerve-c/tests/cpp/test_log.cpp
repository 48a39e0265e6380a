// GoogleTest suite of logging in C++: the threshold filters (and the macros skip
// formatting below it), a record's stderr line reads as ROS 2's console prints it with
// the node's full name, and bad levels are errors. That records reach /rosout with every
// field is checked from Rust (crates/nerve-c/tests/log.rs), where they can be decoded.

#include "common.hpp"

#include <nerve/log.hpp>

#include <string>

using namespace nerve_test;

TEST(Log, TheThresholdFiltersAndTheMacrosSkipFormatting) {
  nerve::ContextOptions o = options();
  o.node_namespace = "/arm";
  nerve::Context ctx(o);
  nerve::Node node(ctx, node_name("logger"));
  nerve::log::set_level(node, nerve::log::Level::warn);
  EXPECT_FALSE(nerve::log::enabled(node, nerve::log::Level::info));
  EXPECT_TRUE(nerve::log::enabled(node, nerve::log::Level::error));
  int formatted = 0;
  auto count = [&] {
    ++formatted;
    return "x";
  };
  testing::internal::CaptureStderr();
  NERVE_INFO(node, "hidden " << count());
  NERVE_WARN(node, "speed " << 2.5 << " m/s " << count());
  nerve::log::error(node, "plain");
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(formatted, 1) << "the info record was formatted below the threshold";
  EXPECT_FALSE(contains(err, "hidden")) << err;
  EXPECT_TRUE(contains(err, "[WARN] [")) << err;
  EXPECT_TRUE(contains(err, "[" + node.name() + "]: speed 2.5 m/s x")) << err;
  EXPECT_TRUE(contains(err, "[ERROR] [")) << err;
  EXPECT_TRUE(contains(err, "]: plain")) << err;
  EXPECT_EQ(node.name().rfind("/arm/", 0), 0u) << node.name();
}

TEST(Log, BadLevelsAreErrors) {
  nerve::Context ctx(options());
  nerve::Node node(ctx, node_name("badlevel"));
  EXPECT_EQ(nerve_node_log(node.handle(), 15, "x", nullptr, nullptr, 0),
            NERVE_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(nerve_last_error(), "log level 15")) << nerve_last_error();
  EXPECT_EQ(nerve_node_log(node.handle(), NERVE_LOG_INFO, nullptr, nullptr, nullptr, 0),
            NERVE_ERR_NULL);
  EXPECT_THROW(nerve::log::set_level(node, static_cast<nerve::log::Level>(-1)), nerve::Error);
  nerve_node_t none{};
  EXPECT_EQ(nerve_node_log(none, NERVE_LOG_INFO, "x", nullptr, nullptr, 0),
            NERVE_ERR_BAD_HANDLE);
}
