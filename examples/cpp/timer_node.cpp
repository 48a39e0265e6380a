// Timers on an executor: a 10 Hz control loop publishing CmdVel on /cmd_vel (on an
// absolute grid: an overrun skips ticks instead of drifting), a 1 Hz status timer
// reading the loop's counters, and a one-shot timer that ends the node after --seconds.
// Everything runs on the thread that spins, one callback at a time: no locks needed.
//
//     timer_node [--topic /cmd_vel] [--rate 10] [--seconds 3]
#include <nerve.hpp>
#include <nerve/msgs/cmd_vel.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "args.hpp"

int main(int argc, char** argv) try {
  using namespace std::chrono_literals;
  const example::Args args(argc, argv);
  const std::string topic = args.str("topic", "/cmd_vel");
  const double rate = args.num("rate", 10.0);
  const double seconds = args.num("seconds", 3.0);
  if (!(rate > 0.0) || !std::isfinite(rate)) {
    std::fprintf(stderr, "--rate must be a positive number\n");
    return 2;
  }

  nerve::Context ctx;
  nerve::Node node(ctx, "cpp_timer_node");
  auto cmd = node.publisher<nerve::msgs::CmdVel>(topic);
  nerve::Executor exec(ctx);

  const auto period = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(1.0 / rate));
  nerve::Timer control = exec.add_timer("control", period, [&](const nerve::Tick& t) {
    // t.deadline_ns: when this tick was due; t.fired_ns: when it ran (monotonic ns)
    const double phase = static_cast<double>(t.count) / rate;
    auto m = cmd.loan();
    m->stamp.nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    m->linear = 0.5f;
    m->angular = static_cast<float>(0.3 * std::sin(phase));
    cmd.send(std::move(m));
  });
  nerve::Timer status = exec.add_timer("status", 1s, [&](const nerve::Tick& t) {
    std::printf("timer_node: control fired %llu times, skipped %llu; status late by %.1f us\n",
                static_cast<unsigned long long>(control.fired()),
                static_cast<unsigned long long>(control.skipped()),
                static_cast<double>(t.fired_ns - t.deadline_ns) / 1e3);
    std::fflush(stdout);
  });
  nerve::Timer done = exec.add_one_shot("done", std::chrono::duration<double>(seconds), [&] {
    control.cancel();
    exec.stop();
  });

  std::printf("timer_node: CmdVel on %s at %g Hz for %g s\n", topic.c_str(), rate, seconds);
  std::fflush(stdout);
  exec.spin();  // until `done` stops it, or Ctrl-C
  std::printf("timer_node: control fired %llu times\n", static_cast<unsigned long long>(control.fired()));
  return 0;
} catch (const nerve::Error& e) {
  std::fprintf(stderr, "timer_node: %s\n", e.what());
  return 1;
}
