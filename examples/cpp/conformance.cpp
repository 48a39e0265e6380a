// The C++ door of the conformance matrix (crates/nerve-py/tests/test_conformance.py):
// performs one command through nerve.hpp and prints its outcome as one JSON line.
//
//     conformance --topic TOPIC --type TYPE [--max-payload BYTES] [--unsent-loans N]
//                 [--wait-clock] < payloads
//     conformance --spin TOPIC --type nerve_msgs/CmdVel
//     conformance --call SERVICE --type nerve_msgs/AddTwoInts [--timeout-ms MS] < request
//
// C++ has no JSON: each stdin line is one message as `ELEMS HEX` (its slice length and
// payload bytes, which the test builds from JSON). The door subscribes to TOPIC (resolved
// under NERVE_NAMESPACE and NERVE_REMAP), publishes each payload as the typed message TYPE
// (nerve_msgs/CmdVel, Imu, BatteryState, Odometry, LaserScan) through a loan and prints
// {"topic": RESOLVED, "results": [{"ok_hex": HEX} or {"error": STATUS, "message": WHAT}]};
// --unsent-loans N first loans N samples and destroys each unsent, --wait-clock first
// waits for the clock to leave 0 (simulation time); a message that came back carries its
// header's "wall_ns". An error before any
// message prints one {"error": ..., "message": ...}. With --call it
// calls SERVICE once with the request (one such line), waiting first for a server, then
// for the response, and prints {"ok_hex": RESPONSE} or the error. An error's "error" is
// its kind, told by its C++ class (no_server, server_gone, handler_failed, timeout,
// too_large, too_many_in_flight, rejected, malformed; type_mismatch by its code), or the
// status name for a status without a kind of its own. With --spin it spins a node with a subscription on TOPIC in an executor,
// prints "spinning", and after Ctrl-C (or SIGTERM) prints {"ok": "interrupted"}.
#include <nerve.hpp>
#include <nerve/msgs/add_two_ints.hpp>
#include <nerve/msgs/battery_state.hpp>
#include <nerve/msgs/cmd_vel.hpp>
#include <nerve/msgs/imu.hpp>
#include <nerve/msgs/laser_scan.hpp>
#include <nerve/msgs/odometry.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "args.hpp"

namespace {

using namespace std::chrono_literals;

/// `s` as a JSON string.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

/// The matrix's kind of a failure, from its C++ class (the typed errors, no text read);
/// a status without a kind of its own (NERVE_ERR_TOPIC, ...) is given by name, and the
/// test reads its kind from the message.
std::string kind(const nerve::Error& e) {
  if (dynamic_cast<const nerve::NoServer*>(&e)) return "no_server";
  if (dynamic_cast<const nerve::ServerGone*>(&e)) return "server_gone";
  if (dynamic_cast<const nerve::HandlerFailed*>(&e)) return "handler_failed";
  if (dynamic_cast<const nerve::TooManyInFlight*>(&e)) return "too_many_in_flight";
  if (dynamic_cast<const nerve::Rejected*>(&e)) return "rejected";
  if (dynamic_cast<const nerve::Malformed*>(&e)) return "malformed";
  if (dynamic_cast<const nerve::Timeout*>(&e)) return "timeout";
  if (dynamic_cast<const nerve::TooLarge*>(&e)) return "too_large";
  if (e.code() == NERVE_ERR_TYPE_MISMATCH) return "type_mismatch";
  return nerve::status_name(e.code());
}

std::string error(const nerve::Error& e) {
  return "{\"error\": " + quoted(kind(e)) + ", \"message\": " + quoted(e.what()) + "}";
}

std::string hex(const void* data, std::size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
  return out;
}

std::vector<unsigned char> unhex(const std::string& s) {
  std::vector<unsigned char> out;
  for (std::size_t i = 0; i + 1 < s.size(); i += 2)
    out.push_back(static_cast<unsigned char>(std::stoi(s.substr(i, 2), nullptr, 16)));
  return out;
}

template <class T>
std::string roundtrip(nerve::Node& node, const std::string& topic, const nerve::Qos& qos,
                      long long unsent_loans) {
  using E = typename nerve::message_traits<T>::elem_type;
  nerve::Publisher<T> pub;
  nerve::Subscriber<T> sub;
  try {
    pub = node.publisher<T>(topic, qos);
    sub = node.subscriber<T>(topic, qos);
  } catch (const nerve::Error& e) {
    return error(e);
  }
  try {
    // a loan destroyed unsent goes back to the pool and is never delivered
    for (long long i = 0; i < unsent_loans; ++i) nerve::Loan<T> unsent = pub.loan();
  } catch (const nerve::Error& e) {
    return error(e);
  }
  std::string results;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    std::istringstream in(line);
    std::size_t elems = 0;
    std::string payload;
    in >> elems >> payload;
    const std::vector<unsigned char> bytes = unhex(payload);
    if (!results.empty()) results += ", ";
    try {
      nerve::Loan<T> loan = [&] {
        if constexpr (nerve::detail::is_elem<E>) return pub.loan(elems);
        else return pub.loan();
      }();
      if (loan.size_bytes() != bytes.size()) {
        results += "{\"error\": \"bad_payload\", \"message\": " +
                   quoted("a payload of " + std::to_string(bytes.size()) + " bytes for " +
                          std::to_string(loan.size_bytes())) + "}";
        continue;
      }
      std::memcpy(static_cast<void*>(loan.get()), bytes.data(), bytes.size());
      pub.send(std::move(loan));
      auto got = sub.take(10s);
      if (!got) {
        results += "{\"error\": \"timeout\", \"message\": \"nothing came back within 10 s\"}";
        continue;
      }
      results += "{\"ok_hex\": " + quoted(hex(got->ref().data(), got->size_bytes())) +
                 ", \"wall_ns\": " + std::to_string(got->wall_ns()) + "}";
    } catch (const nerve::Error& e) {
      results += error(e);
    }
  }
  // what was sent survives this process for subscribers that have not attached yet
  pub.wait_for_subscribers(pub.subscriber_count(), 1s);
  return "{\"topic\": " + quoted(sub.topic_name()) + ", \"results\": [" + results + "]}";
}

template <class S>
std::string call(nerve::Node& node, const std::string& service, std::chrono::milliseconds timeout) {
  using Request = typename nerve::service_traits<S>::request;
  std::string line;
  std::getline(std::cin, line);
  std::istringstream in(line);
  std::size_t elems = 0;
  std::string payload;
  in >> elems >> payload;
  const std::vector<unsigned char> bytes = unhex(payload);
  Request req{};
  if (bytes.size() != sizeof(Request)) {
    return "{\"error\": \"bad_payload\", \"message\": " +
           quoted("a request of " + std::to_string(bytes.size()) + " bytes for " +
                  std::to_string(sizeof(Request))) + "}";
  }
  std::memcpy(static_cast<void*>(&req), bytes.data(), bytes.size());
  try {
    auto client = node.client<S>(service);
    // a server that is starting gets the time to come; without one the call itself
    // fails with nerve::NoServer
    (void)client.wait_for_service(timeout);
    const auto reply = client.call(req, timeout);
    return "{\"ok_hex\": " + quoted(hex(reply.ref().data(), reply.size_bytes())) + "}";
  } catch (const nerve::Error& e) {
    return error(e);
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const example::Args args(argc, argv);
  const std::string topic = args.str("topic", "");
  const std::string type = args.str("type", "");
  nerve::Qos qos = nerve::Qos::sensor();
  qos.depth = 64;
  qos.max_payload = static_cast<std::uint64_t>(args.integer("max-payload", 0));
  const long long unsent = args.integer("unsent-loans", 0);
  nerve::Context ctx;
  nerve::Node node(ctx, "conformance_cpp");
  if (args.flag("wait-clock")) {
    // simulation time stands at 0 until the first message on /clock
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (nerve_time_now_ns() == 0) {
      if (std::chrono::steady_clock::now() >= deadline) {
        std::printf("{\"error\": \"timeout\", \"message\": \"the clock stayed at 0 for 10 s\"}\n");
        return 0;
      }
      std::this_thread::sleep_for(5ms);
    }
  }
  std::string out;
  const std::string name = type.substr(type.rfind('/') + 1);
  const std::string service = args.str("call", "");
  const std::string spin = args.str("spin", "");
  if (!spin.empty()) {
    if (name != "CmdVel") {
      out = "{\"error\": \"unknown_type\", \"message\": " + quoted("unknown type " + type) + "}";
    } else {
      nerve::Executor exec(ctx);  // SIGINT / SIGTERM end exec.spin()
      exec.add(node.subscriber<nerve::msgs::CmdVel>(spin),
               [](const nerve::SampleRef<nerve::msgs::CmdVel>&) {});
      std::printf("spinning\n");
      std::fflush(stdout);
      exec.spin();
      out = "{\"ok\": \"interrupted\"}";
    }
  } else if (!service.empty()) {
    const std::chrono::milliseconds timeout(args.integer("timeout-ms", 5000));
    if (name == "AddTwoInts") out = call<nerve::msgs::AddTwoInts>(node, service, timeout);
    else out = "{\"error\": \"unknown_type\", \"message\": " + quoted("unknown service type " + type) + "}";
  } else if (name == "CmdVel") out = roundtrip<nerve::msgs::CmdVel>(node, topic, qos, unsent);
  else if (name == "Imu") out = roundtrip<nerve::msgs::Imu>(node, topic, qos, unsent);
  else if (name == "BatteryState") out = roundtrip<nerve::msgs::BatteryState>(node, topic, qos, unsent);
  else if (name == "Odometry") out = roundtrip<nerve::msgs::Odometry>(node, topic, qos, unsent);
  else if (name == "LaserScan") out = roundtrip<nerve::msgs::LaserScan>(node, topic, qos, unsent);
  else out = "{\"error\": \"unknown_type\", \"message\": " + quoted("unknown type " + type) + "}";
  std::printf("%s\n", out.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "conformance: %s\n", e.what());
  return 1;
}
