// Serves nerve_msgs/AddTwoInts on /add (or --name) on an executor until interrupted: the
// C++ twin of `cargo run -p nerve-examples --bin add_server`. Call it from C++
// (add_two_ints_client), Python (node.create_client(srv.AddTwoInts, "/add")) or the CLI:
//     nerve service call /add AddTwoInts '{"a": 2, "b": 40}'
//
//     add_two_ints_server [--name /add] [--count N]
#include <nerve.hpp>
#include <nerve/msgs/add_two_ints.hpp>

#include <cstdio>

#include "args.hpp"

using nerve::msgs::AddTwoInts;
using nerve::msgs::Int;
using nerve::msgs::TwoInts;

int main(int argc, char** argv) try {
  const example::Args args(argc, argv);
  const std::string name = args.str("name", "/add");
  const auto count = args.integer("count", -1);

  nerve::Context ctx;
  nerve::Node node(ctx, "cpp_add_two_ints_server");
  nerve::Executor exec(ctx);  // SIGINT / SIGTERM end exec.spin()
  long long served = 0;
  exec.serve(node.server<AddTwoInts>(name), [&](const TwoInts& req) {
    // the request is read in place; the response is copied into the reply sample
    const Int sum{static_cast<std::int64_t>(static_cast<std::uint64_t>(req.a) +
                                            static_cast<std::uint64_t>(req.b))};  // wraps, as Rust's
    std::printf("add_two_ints_server: %lld + %lld = %lld\n", static_cast<long long>(req.a),
                static_cast<long long>(req.b), static_cast<long long>(sum.value));
    std::fflush(stdout);
    if (count >= 0 && ++served >= count) exec.stop();
    return sum;
  });
  std::printf("add_two_ints_server: serving %s\n", name.c_str());
  std::fflush(stdout);
  exec.spin();
  return 0;
} catch (const nerve::Error& e) {
  std::fprintf(stderr, "add_two_ints_server: %s\n", e.what());
  return 1;
}
