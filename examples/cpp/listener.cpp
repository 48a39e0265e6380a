// Receives Imu messages on /imu on an executor and prints one line per second (or every
// message with --verbose): the C++ twin of `cargo run -p nerve-examples --bin listener`.
//
//     listener [--topic /imu] [--count N] [--verbose]
#include <nerve.hpp>
#include <nerve/msgs/imu.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>

#include "args.hpp"

int main(int argc, char** argv) try {
  const example::Args args(argc, argv);
  const std::string topic = args.str("topic", "/imu");
  const auto count = args.integer("count", -1);
  const bool verbose = args.flag("verbose");

  nerve::Context ctx;
  nerve::Node node(ctx, "cpp_listener");
  nerve::Executor exec(ctx);  // SIGINT / SIGTERM end exec.spin()
  std::printf("listener: waiting for Imu on %s (domain %u)\n", topic.c_str(), ctx.domain());
  std::fflush(stdout);

  long long n = 0;
  std::uint64_t last_seq = 0, lost = 0;
  auto last_report = std::chrono::steady_clock::now();
  exec.add(node.subscriber<nerve::msgs::Imu>(topic), [&](const nerve::SampleRef<nerve::msgs::Imu>& s) {
    // `s` views the sample in shared memory: valid during this callback, no copy made
    ++n;
    if (last_seq != 0 && s.seq() > last_seq + 1) lost += s.seq() - last_seq - 1;
    last_seq = s.seq();
    if (verbose) {
      std::printf("seq %llu accel z %.2f\n", static_cast<unsigned long long>(s.seq()),
                  s->linear_acceleration.z);
      std::fflush(stdout);
    } else if (std::chrono::steady_clock::now() - last_report >= std::chrono::seconds(1)) {
      std::printf("listener: %lld received, %llu lost\n", n, static_cast<unsigned long long>(lost));
      std::fflush(stdout);
      last_report = std::chrono::steady_clock::now();
    }
    if (count >= 0 && n >= count) exec.stop();
  });
  exec.spin();
  std::printf("listener: received %lld messages, %llu lost\n", n, static_cast<unsigned long long>(lost));
  return 0;
} catch (const nerve::Error& e) {
  std::fprintf(stderr, "listener: %s\n", e.what());
  return 1;
}
