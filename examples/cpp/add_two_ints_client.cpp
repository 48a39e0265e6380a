// Calls nerve_msgs/AddTwoInts on /add (or --name) and prints the sum: against this
// directory's add_two_ints_server, the Rust add_server or a Python server.
//
//     add_two_ints_client [--a 2] [--b 40] [--name /add] [--timeout 5]
#include <nerve.hpp>
#include <nerve/msgs/add_two_ints.hpp>

#include <chrono>
#include <cstdio>

#include "args.hpp"

using nerve::msgs::AddTwoInts;

int main(int argc, char** argv) try {
  const example::Args args(argc, argv);
  const std::string name = args.str("name", "/add");
  const std::chrono::duration<double> timeout(args.num("timeout", 5.0));

  nerve::Context ctx;
  nerve::Node node(ctx, "cpp_add_two_ints_client");
  auto client = node.client<AddTwoInts>(name);
  if (!client.wait_for_service(timeout)) {
    std::fprintf(stderr, "add_two_ints_client: no server of %s within %.1f s\n", name.c_str(), timeout.count());
    return 1;
  }
  nerve::msgs::TwoInts req{};
  req.a = args.integer("a", 2);
  req.b = args.integer("b", 40);
  const auto reply = client.call(req, timeout);  // throws nerve::Error on a timeout or failure
  std::printf("%lld + %lld = %lld\n", static_cast<long long>(req.a), static_cast<long long>(req.b),
              static_cast<long long>(reply->value));
  return 0;
} catch (const nerve::Error& e) {
  std::fprintf(stderr, "add_two_ints_client: %s\n", e.what());
  return 1;
}
