// The C++ side of `nerve bench paths` and `nerve bench service`: a pinger and a ponger
// written against the C++ API (nerve.hpp) as a C++ user writes them, doing the Rust
// peers' work (the pinger fills the whole message, the ponger copies it into a reply on
// the pinger's reply topic), and a service client and server of nerve_msgs/Echo
// payloads. Compiled into the benchmark binary by build.rs; Rust calls the extern "C"
// entry points below.
#include <nerve.hpp>
#include <nerve/msgs/cmd_vel.hpp>
#include <nerve/msgs/imu.hpp>
#include <nerve/msgs/point_cloud.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>

namespace {

constexpr std::uint64_t kTimeoutNs = 5'000'000'000ULL;

nerve::Qos bench_qos() {
  nerve::Qos q;
  q.depth = 64;
  return q;
}

nerve::Context context(std::uint32_t domain) {
  nerve::ContextOptions o;
  o.domain = domain;
  return nerve::Context(o);
}

int fail(const std::exception& e, char* err, std::size_t cap) {
  if (err != nullptr && cap > 0) {
    std::size_t n = std::min(cap - 1, std::strlen(e.what()));
    std::memcpy(err, e.what(), n);
    err[n] = '\0';
  }
  return 1;
}

// The pattern of the Rust peers: word i of the payload is tag + i (little-endian).
void fill(void* data, std::size_t bytes, std::uint64_t tag) {
  auto* words = static_cast<std::uint64_t*>(data);
  for (std::size_t i = 0; i < bytes / 8; ++i) words[i] = tag + i;
}

std::uint64_t tag_of(const void* data) {
  std::uint64_t t;
  std::memcpy(&t, data, 8);
  return t;
}

template <class T>
nerve::Loan<T> loan(nerve::Publisher<T>& p, std::size_t elems) {
  if constexpr (!std::is_same_v<typename nerve::message_traits<T>::elem_type, nerve::no_elem>) {
    return p.loan(elems);
  } else {
    (void)elems;
    return p.loan();
  }
}

template <class T>
int ponger(const char* topic, std::uint32_t domain, const int* stop, int* ready) {
  nerve::Context ctx = context(domain);
  nerve::Node node(ctx, "paths_cpp_ponger");
  nerve::Subscriber<T> sub(node, topic, bench_qos());
  nerve::Publisher<T> reply(node, std::string(topic) + "/pong0", bench_qos());
  __atomic_store_n(ready, 1, __ATOMIC_RELEASE);
  while (__atomic_load_n(stop, __ATOMIC_RELAXED) == 0) {
    auto got = sub.try_take();
    if (!got.ok()) {
      if (got.is_nothing()) continue;
      got.check();
    }
    const nerve::Sample<T>& s = got.value();
    nerve::Loan<T> out = loan(reply, s.ref().view().elems);
    std::memcpy(static_cast<void*>(out.get()), static_cast<const void*>(s.get()), s.size_bytes());
    out.send();
  }
  return 0;
}

template <class T>
int pinger(const char* topic, std::uint32_t domain, std::size_t elems, std::size_t warmup,
           std::size_t iterations, std::uint64_t* rtt_ns) {
  nerve::Context ctx = context(domain);
  nerve::Node node(ctx, "paths_cpp_pinger");
  nerve::Publisher<T> ping(node, topic, bench_qos());
  nerve::Subscriber<T> pong(node, std::string(topic) + "/pong0", bench_qos());
  if (!ping.wait_for_subscribers(1, std::chrono::seconds(5))) {
    throw nerve::Error(NERVE_ERR_TIMEOUT, "the ponger did not appear");
  }
  std::uint64_t last = nerve_stamp_ns();
  for (std::size_t round = 0; round < warmup + iterations; ++round) {
    const std::uint64_t want = round;
    nerve::Loan<T> l = loan(ping, elems);
    fill(l.get(), l.size_bytes(), want);
    l.send();
    const std::uint64_t give_up = nerve_mono_ns() + kTimeoutNs;
    for (std::uint64_t spins = 0;; ++spins) {
      auto got = pong.try_take();
      if (got.ok()) {
        if (tag_of(got.value().get()) == want) break;
        continue;
      }
      if (!got.is_nothing()) got.check();
      if ((spins & 0xFFF) == 0 && nerve_mono_ns() > give_up) {
        throw nerve::Error(NERVE_ERR_TIMEOUT, "no reply within 5 s (round " + std::to_string(round) + ")");
      }
    }
    const std::uint64_t now = nerve_stamp_ns();
    if (round >= warmup) rtt_ns[round - warmup] = now - last;
    last = now;
  }
  return 0;
}

}  // namespace

extern "C" {

// Answers pings of message `kind` (0 CmdVel, 1 Imu, 2 PointCloud) on `topic` until
// `*stop` is set; sets `*ready` once it listens. 0, or 1 with the reason in `err`.
int nerve_bench_cpp_ponger(int kind, const char* topic, std::uint32_t domain, const int* stop,
                           int* ready, char* err, std::size_t err_cap) {
  try {
    switch (kind) {
      case 0: return ponger<nerve::msgs::CmdVel>(topic, domain, stop, ready);
      case 1: return ponger<nerve::msgs::Imu>(topic, domain, stop, ready);
      case 2: return ponger<nerve::msgs::PointCloud>(topic, domain, stop, ready);
      default: throw nerve::Error(NERVE_ERR_INVALID_ARGUMENT, "unknown message kind");
    }
  } catch (const std::exception& e) {
    return fail(e, err, err_cap);
  }
}

// Runs `warmup + iterations` round trips (busy-polling for each reply) and writes the
// measured ones' round-trip times (ns) to `rtt_ns`. 0, or 1 with the reason in `err`.
int nerve_bench_cpp_pinger(int kind, const char* topic, std::uint32_t domain, std::size_t elems,
                           std::size_t warmup, std::size_t iterations, std::uint64_t* rtt_ns,
                           char* err, std::size_t err_cap) {
  try {
    switch (kind) {
      case 0: return pinger<nerve::msgs::CmdVel>(topic, domain, elems, warmup, iterations, rtt_ns);
      case 1: return pinger<nerve::msgs::Imu>(topic, domain, elems, warmup, iterations, rtt_ns);
      case 2: return pinger<nerve::msgs::PointCloud>(topic, domain, elems, warmup, iterations, rtt_ns);
      default: throw nerve::Error(NERVE_ERR_INVALID_ARGUMENT, "unknown message kind");
    }
  } catch (const std::exception& e) {
    return fail(e, err, err_cap);
  }
}

}  // extern "C"

// ---- nerve_msgs/Echo over the C++ API, for `nerve bench service` ----
#include <nerve/msgs/echo.hpp>

#include <vector>

namespace {

using Echo = nerve::msgs::Echo;
constexpr std::uint64_t kMaxPayload = 64ULL << 20;

struct EchoClient {
  nerve::Context ctx;
  nerve::Node node;
  nerve::Client<Echo> client;
  std::vector<std::uint8_t> request;
  std::uint64_t seq = 0;

  EchoClient(const char* name, std::uint32_t domain)
      : ctx(context(domain)), node(ctx, "bench_cpp_client"), client(node, name, kMaxPayload) {}
};

}  // namespace

extern "C" {

// A client of the echo service `name`, once its server is there (within `timeout_ns`);
// null with the reason in `err`.
void* nerve_bench_cpp_echo_client(const char* name, std::uint32_t domain, std::uint64_t timeout_ns,
                                  char* err, std::size_t err_cap) {
  try {
    auto* c = new EchoClient(name, domain);
    if (!c->client.wait_for_service(std::chrono::nanoseconds(timeout_ns))) {
      delete c;
      throw nerve::Error(NERVE_ERR_TIMEOUT, std::string("no server for ") + name);
    }
    return c;
  } catch (const std::exception& e) {
    fail(e, err, err_cap);
    return nullptr;
  }
}

// One call of `len` payload bytes: `fill` writes the request, `check` reads the reply
// (non-zero: wrong). 0, or 1 with the reason in `err`.
int nerve_bench_cpp_echo_call(void* client, std::size_t len,
                              void (*fill)(void*, std::uint8_t*, std::size_t),
                              int (*check)(void*, const std::uint8_t*, std::size_t), void* user,
                              char* err, std::size_t err_cap) {
  try {
    auto* c = static_cast<EchoClient*>(client);
    c->request.resize(len);
    fill(user, c->request.data(), len);
    nerve::msgs::Bytes head{};
    head.tag = ++c->seq;
    auto reply = c->client.call(head, nerve::span<const std::uint8_t>(c->request.data(), len),
                                std::chrono::seconds(10));
    if (reply->tag != c->seq) throw nerve::Error(NERVE_ERR_CALL, "a reply with another tag");
    auto elems = reply.elems();
    if (check(user, elems.data(), elems.size()) != 0) {
      throw nerve::Error(NERVE_ERR_CALL, "the reply's payload differs from the request's");
    }
    return 0;
  } catch (const std::exception& e) {
    return fail(e, err, err_cap);
  }
}

// Frees a client of nerve_bench_cpp_echo_client.
void nerve_bench_cpp_echo_client_free(void* client) { delete static_cast<EchoClient*>(client); }

// Serves the echo service `name` (copying each request into its reply) until a shutdown
// is requested (SIGTERM); sets `*ready` once it serves. 0, or 1 with the reason in `err`.
int nerve_bench_cpp_echo_server(const char* name, int* ready, char* err, std::size_t err_cap) {
  try {
    nerve::Context ctx;
    nerve::Node node(ctx, "bench_cpp_server");
    nerve::Server<Echo> server(node, name, kMaxPayload);
    __atomic_store_n(ready, 1, __ATOMIC_RELEASE);
    while (!nerve_shutdown_requested()) {
      auto got = server.try_take(std::chrono::milliseconds(100));
      if (!got.ok()) {
        if (got.is_nothing()) continue;
        got.check();
      }
      auto& req = got.value();
      nerve::msgs::Bytes head{};
      head.tag = req->tag;
      req.reply(head, req.elems());
    }
    return 0;
  } catch (const std::exception& e) {
    return fail(e, err, err_cap);
  }
}

}  // extern "C"

// ---- the lidar pipeline's filter stage in C++, for `nerve bench lidar` ----

extern "C" {

// The filter stage of the traced lidar pipeline: takes `frames` clouds from `input`,
// keeps every other point (`point_step` bytes each) and publishes the result on
// `output`, as the Rust filter does. Sets `*ready` once its endpoints exist. 0, or 1
// with the reason in `err`.
int nerve_bench_cpp_lidar_filter(const char* input, const char* output, std::uint64_t frames,
                                 std::size_t point_step, int* ready, char* err,
                                 std::size_t err_cap) {
  using nerve::msgs::PointCloud;
  try {
    nerve::Context ctx;
    nerve::Node node(ctx, "pipeline_filter");
    nerve::Qos q = nerve::Qos::sensor();
    q.depth = 8;
    nerve::Subscriber<PointCloud> sub(node, input, q);
    nerve::Publisher<PointCloud> out(node, output);
    __atomic_store_n(ready, 1, __ATOMIC_RELEASE);
    const auto wait = std::chrono::seconds(20);
    if (!out.wait_for_subscribers(1, wait)) {
      throw nerve::Error(NERVE_ERR_TIMEOUT, "no application subscribed");
    }
    for (std::uint64_t k = 0; k < frames; ++k) {
      auto cloud = sub.take(wait);
      if (!cloud) break;
      auto in = cloud->elems();
      const std::size_t kept = in.size() / point_step / 2;
      nerve::Loan<PointCloud> loan = out.loan(kept * point_step);
      *loan = **cloud;
      loan->width = static_cast<std::uint32_t>(kept);
      loan->row_step = static_cast<std::uint32_t>(kept * point_step);
      auto dst = loan.elems();
      for (std::size_t i = 0; i < kept; ++i) {
        std::memcpy(dst.data() + i * point_step, in.data() + 2 * i * point_step, point_step);
      }
      cloud.reset();
      loan.send();
    }
    return 0;
  } catch (const std::exception& e) {
    return fail(e, err, err_cap);
  }
}

}  // extern "C"
