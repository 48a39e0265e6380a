// Sends a goal to the action nerve_msgs/Fibonacci on /fibonacci (or --name), prints its
// feedback as it comes and then its result: against this directory's fibonacci_server,
// the Rust `fibonacci` example or a Python action server. --cancel-after N cancels the
// goal after N feedback messages.
//
//     fibonacci_client [--order 10] [--name /fibonacci] [--cancel-after N] [--timeout 10]
#include <nerve.hpp>
#include <nerve/msgs/fibonacci.hpp>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "args.hpp"

using nerve::msgs::Fibonacci;

namespace {

std::string numbers(nerve::span<const std::int64_t> xs) {
  std::string s = "[";
  for (std::size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + std::to_string(xs[i]);
  return s + "]";
}

const char* state_name(nerve::GoalState s) {
  switch (s) {
    case NERVE_GOAL_SUCCEEDED: return "succeeded";
    case NERVE_GOAL_ABORTED: return "aborted";
    case NERVE_GOAL_CANCELED: return "canceled";
    default: return "running";
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const example::Args args(argc, argv);
  const std::string name = args.str("name", "/fibonacci");
  const long long cancel_after = args.integer("cancel-after", -1);
  const std::chrono::duration<double> timeout(args.num("timeout", 10.0));

  nerve::Context ctx;
  nerve::Node node(ctx, "cpp_fibonacci_client");
  nerve::ActionClient<Fibonacci> client(node, name);
  if (!client.wait_for_server(timeout)) {
    std::fprintf(stderr, "fibonacci_client: no server of %s within %.1f s\n", name.c_str(), timeout.count());
    return 1;
  }
  nerve::msgs::FibonacciGoal order{};
  order.order = args.integer("order", 10);
  nerve::Goal<Fibonacci> goal = client.send_goal(order);  // throws with the reason if rejected
  std::printf("goal %s accepted\n", goal.id().c_str());

  long long feedbacks = 0;
  auto print_feedback = [&] {
    while (auto f = goal.try_feedback()) {
      std::printf("feedback: %s\n", numbers(f->elems()).c_str());
      if (++feedbacks == cancel_after) std::printf("cancel: %s\n", state_name(goal.cancel()));
    }
  };
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::optional<nerve::GoalResult<Fibonacci>> r;
  while (!(r = goal.result(std::chrono::milliseconds(20)))) {
    print_feedback();
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "fibonacci_client: no result within %.1f s\n", timeout.count());
      return 1;
    }
  }
  print_feedback();
  std::printf("result: %s %s\n", state_name(r->state), numbers(r->result.elems()).c_str());
  return r->state == NERVE_GOAL_SUCCEEDED || (cancel_after >= 0 && r->state == NERVE_GOAL_CANCELED) ? 0 : 1;
} catch (const nerve::Error& e) {
  std::fprintf(stderr, "fibonacci_client: %s\n", e.what());
  return 1;
}
