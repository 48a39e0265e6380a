// Serves the action nerve_msgs/Fibonacci on /fibonacci (or --name): one number per
// --step-ms for each goal (up to 4 at once), with the sequence so far as feedback, the
// first order + 1 numbers as the result; orders outside 0 to 90 are rejected with the
// reason. The C++ twin of `cargo run -p nerve-examples --bin fibonacci`:
//     fibonacci_client --order 10          (C++)
//     nerve action send_goal /fibonacci Fibonacci '{"order": 10}' --feedback
//     node.create_action_client("/fibonacci", "Fibonacci").send_goal(order=10)   (Python)
//
//     fibonacci_server [--name /fibonacci] [--step-ms 10]
#include <nerve.hpp>
#include <nerve/msgs/fibonacci.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <list>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.hpp"

using nerve::msgs::Fibonacci;
using nerve::msgs::FibonacciGoal;
using nerve::msgs::FibonacciSequence;

namespace {

constexpr std::int64_t kMaxOrder = 90;  // fib(92) is the last that fits an int64

/// An accepted goal and its sequence so far.
struct Running {
  nerve::ServerGoal<Fibonacci> goal;
  std::vector<std::int64_t> seq{0, 1};
};

FibonacciSequence head_of(const std::vector<std::int64_t>& seq) {
  FibonacciSequence h{};
  h.len = seq.size();
  return h;
}

}  // namespace

int main(int argc, char** argv) try {
  using clock = std::chrono::steady_clock;
  const example::Args args(argc, argv);
  const std::string name = args.str("name", "/fibonacci");
  const auto step = std::chrono::milliseconds(args.integer("step-ms", 10));
  nerve::install_shutdown_handlers();

  nerve::Context ctx;
  nerve::Node node(ctx, "cpp_fibonacci");
  nerve::ActionServer<Fibonacci> server(node, name, NERVE_GOAL_PARALLEL, 4);
  std::printf("fibonacci_server: serving %s\n", name.c_str());
  std::fflush(stdout);

  std::list<Running> running;
  auto next_step = clock::now();
  while (!nerve::shutdown_requested()) {
    // answer goal, cancel and result requests; decide on new goals (a throw rejects,
    // its message is the client's reason)
    server.spin_once(step, [](const FibonacciGoal& g) {
      if (g.order < 0 || g.order > kMaxOrder)
        throw std::invalid_argument("order " + std::to_string(g.order) + " is outside 0 to " +
                                    std::to_string(kMaxOrder));
    });
    while (auto g = server.take_goal()) {
      std::printf("fibonacci_server: goal %s, order %lld\n", g->id().c_str(), static_cast<long long>((*g)->order));
      std::fflush(stdout);
      running.push_back(Running{std::move(*g)});
    }
    if (clock::now() < next_step) continue;
    next_step = clock::now() + step;
    for (auto it = running.begin(); it != running.end();) {
      auto& [goal, seq] = *it;
      const auto order = static_cast<std::size_t>(goal->order);
      if (goal.is_canceling() || seq.size() > order) {
        const std::vector<std::int64_t> done(seq.begin(), seq.begin() + std::min(seq.size(), order + 1));
        const nerve::span<const std::int64_t> elems(done.data(), done.size());
        goal.end(goal.is_canceling() ? NERVE_GOAL_CANCELED : NERVE_GOAL_SUCCEEDED, head_of(done), elems);
        it = running.erase(it);
        continue;
      }
      seq.push_back(seq[seq.size() - 1] + seq[seq.size() - 2]);
      goal.send_feedback(head_of(seq), nerve::span<const std::int64_t>(seq.data(), seq.size()));
      ++it;
    }
  }
  return 0;
} catch (const nerve::Error& e) {
  std::fprintf(stderr, "fibonacci_server: %s\n", e.what());
  return 1;
}
