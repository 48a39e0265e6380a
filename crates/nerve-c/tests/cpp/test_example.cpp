// The usage example at the top of nerve.hpp, compiled and run (with a stop after a few
// ticks instead of Ctrl-C, and this process's context options).

#include "common.hpp"

#include <nerve/msgs/cmd_vel.hpp>

#include <cstdio>

using namespace nerve_test;
using nerve::msgs::CmdVel;

TEST(Example, TopOfHeader) {
  const std::string topic = unique("cmd_vel");
  nerve::Context ctx(options());
  nerve::Node node(ctx, node_name("driver"));
  nerve::Publisher<CmdVel> pub(node, topic);
  nerve::Loan<CmdVel> loan = pub.loan();  // written in shared memory
  loan->linear = 0.5f;
  pub.send(std::move(loan));  // zero copy

  nerve::Executor exec(ctx);
  int received = 0;
  exec.add(nerve::Subscriber<CmdVel>(node, topic), [&](nerve::SampleRef<CmdVel> s) {
    std::printf("%f\n", static_cast<double>(s->linear));
    if (++received == 3) exec.stop();
  });
  nerve::Timer tick = exec.add_timer("tick", std::chrono::milliseconds(10), [&] { pub.publish(CmdVel{}); });
  exec.spin();  // until exec.stop()
  EXPECT_EQ(received, 3);
  EXPECT_GE(tick.fired(), 3u);
}
