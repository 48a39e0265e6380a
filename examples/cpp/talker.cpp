// Publishes Imu messages at 100 Hz on /imu until interrupted (or --count N), written in
// place in shared memory: the C++ twin of `cargo run -p nerve-examples --bin talker`.
// Any listener hears it: this directory's `listener`, the Rust `listener`, or
// crates/nerve-py/examples/listener.py.
//
//     talker [--topic /imu] [--rate 100] [--count N] [--wait-subscribers N]
#include <nerve.hpp>
#include <nerve/msgs/imu.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

#include "args.hpp"

int main(int argc, char** argv) try {
  const example::Args args(argc, argv);
  const std::string topic = args.str("topic", "/imu");
  const double rate = args.num("rate", 100.0);
  const auto count = args.integer("count", -1);
  const auto wait_subscribers = static_cast<std::size_t>(args.integer("wait-subscribers", 0));
  if (!(rate > 0.0) || !std::isfinite(rate)) {
    std::fprintf(stderr, "--rate must be a positive number\n");
    return 2;
  }
  nerve::install_shutdown_handlers();  // Ctrl-C ends the loop below

  nerve::Context ctx;  // NERVE_DOMAIN, NERVE_STATE_DIR, ... from the environment
  nerve::Node node(ctx, "cpp_talker");
  auto imu = node.publisher<nerve::msgs::Imu>(topic);
  if (wait_subscribers > 0 && !imu.wait_for_subscribers(wait_subscribers, std::chrono::seconds(10))) {
    std::fprintf(stderr, "no subscriber on %s within 10 s\n", topic.c_str());
    return 1;
  }
  std::printf("talker: publishing Imu on %s at %g Hz (domain %u)\n", topic.c_str(), rate, ctx.domain());
  std::fflush(stdout);

  const auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(1.0 / rate));
  const auto start = std::chrono::steady_clock::now();
  long long k = 0;
  while (!nerve::shutdown_requested() && (count < 0 || k < count)) {
    const double t = static_cast<double>(k) / rate;
    auto m = imu.loan();  // zeroed, in shared memory
    m->stamp.nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    m->orientation = {0.0, 0.0, std::sin(t / 2.0), std::cos(t / 2.0)};
    m->angular_velocity = {0.0, 0.0, 1.0};
    m->linear_acceleration = {0.0, 0.0, 9.81};
    imu.send(std::move(m));
    ++k;
    std::this_thread::sleep_until(start + period * k);  // absolute: the rate does not drift
  }
  std::printf("talker: sent %lld messages\n", k);
  return 0;
} catch (const nerve::Error& e) {
  std::fprintf(stderr, "talker: %s\n", e.what());
  return 1;
}
