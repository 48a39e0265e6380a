// The hot paths of the C++ API do not allocate after warm-up: a counting global operator
// new (this file replaces it for the whole test program) counts the allocations of the
// calling thread across loan/send, take/release, publish, send/take/reply/wait of
// services, blocking calls, and executor dispatch of samples and requests.
//
// This counts C++ allocations (operator new), i.e. those of nerve.hpp; the Rust library
// behind the C ABI allocates through malloc and is not counted here.

#include "common.hpp"

#include <nerve/msgs/add_two_ints.hpp>
#include <nerve/msgs/bytes.hpp>
#include <nerve/msgs/cmd_vel.hpp>

#include <atomic>
#include <cstdlib>
#include <new>
#include <thread>

namespace {
/// operator new calls of this thread.
thread_local std::size_t t_allocations = 0;

void* counted(std::size_t n) {
  ++t_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}

void* counted_aligned(std::size_t n, std::align_val_t al) {
  ++t_allocations;
  std::size_t a = static_cast<std::size_t>(al);
  if (a < sizeof(void*)) a = sizeof(void*);
  void* p = nullptr;
  if (::posix_memalign(&p, a, n == 0 ? 1 : n) != 0) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new(std::size_t n, std::align_val_t al) { return counted_aligned(n, al); }
void* operator new[](std::size_t n, std::align_val_t al) { return counted_aligned(n, al); }
void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  try {
    return counted_aligned(n, al);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  try {
    return counted_aligned(n, al);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

using namespace nerve_test;
using nerve::msgs::AddTwoInts;
using nerve::msgs::Bytes;
using nerve::msgs::CmdVel;
using nerve::msgs::Int;
using nerve::msgs::TwoInts;

namespace {

constexpr int kWarmup = 50;
constexpr int kRounds = 500;

/// Runs `step` kWarmup times, then counts this thread's allocations over kRounds more;
/// `failures` gets the rounds whose step returned false.
template <class F>
std::size_t allocations_after_warmup(F step, int& failures) {
  for (int i = 0; i < kWarmup; ++i) (void)step(i);
  failures = 0;
  const std::size_t before = t_allocations;
  for (int i = 0; i < kRounds; ++i)
    if (!step(kWarmup + i)) ++failures;
  return t_allocations - before;
}

struct Alloc : ::testing::Test {
  nerve::Context ctx{options()};
  nerve::Node node{ctx, node_name("alloc")};
};

}  // namespace

TEST(AllocCounter, CountsThisThreadsNews) {
  const std::size_t before = t_allocations;
  auto* p = new int(5);
  delete p;
  auto* a = new (std::align_val_t(64)) double[4];
  ::operator delete[](a, std::align_val_t(64));
  EXPECT_EQ(t_allocations - before, 2u);
}

TEST_F(Alloc, LoanSendTakeReleaseDoNotAllocate) {
  const std::string topic = unique("alloc_loan");
  nerve::Publisher<CmdVel> pub(node, topic);
  nerve::Subscriber<CmdVel> sub(node, topic, nerve::Qos::reliable());
  int failures = 0;
  const std::size_t n = allocations_after_warmup(
      [&](int i) {
        nerve::Loan<CmdVel> loan = pub.loan();
        loan->linear = static_cast<float>(i);
        pub.send(std::move(loan));
        std::optional<nerve::Sample<CmdVel>> s = sub.take();
        return s.has_value() && (*s)->linear == static_cast<float>(i);
      },  // the sample is released here
      failures);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(failures, 0);
}

TEST_F(Alloc, TryFormsDoNotAllocate) {
  const std::string topic = unique("alloc_try");
  nerve::Publisher<Bytes> pub(node, topic);
  nerve::Subscriber<Bytes> sub(node, topic, nerve::Qos::reliable());
  int failures = 0;
  const std::size_t n = allocations_after_warmup(
      [&](int i) {
        nerve::Result<nerve::Loan<Bytes>> loan = pub.try_loan(16);
        if (!loan.ok()) return false;
        loan->get()->tag = static_cast<std::uint64_t>(i);
        for (auto& b : loan->elems()) b = static_cast<std::uint8_t>(i);
        if (!pub.try_send(std::move(*loan)).ok()) return false;
        nerve::Result<nerve::Sample<Bytes>> s = sub.try_take();
        if (!s.ok() || (*s)->tag != static_cast<std::uint64_t>(i) || s->elems().size() != 16) return false;
        s->reset();  // release now
        return sub.try_take().is_nothing();  // "nothing" is not an error and costs nothing
      },
      failures);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(failures, 0);
}

TEST_F(Alloc, PublishDoesNotAllocate) {
  const std::string topic = unique("alloc_pub");
  nerve::Publisher<CmdVel> pub(node, topic);
  nerve::Subscriber<CmdVel> sub(node, topic, nerve::Qos::reliable());
  nerve::Publisher<Bytes> bpub(node, unique("alloc_pub_bytes"));
  const std::array<std::uint8_t, 32> payload{};
  int failures = 0;
  const std::size_t n = allocations_after_warmup(
      [&](int i) {
        CmdVel m{};
        m.angular = static_cast<float>(i);
        pub.publish(m);
        if (!pub.try_publish(m).ok()) return false;
        Bytes h{};
        bpub.publish(h, payload);
        return sub.take().has_value() && sub.take().has_value();
      },
      failures);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(failures, 0);
}

TEST_F(Alloc, ServiceSendTakeReplyWaitDoNotAllocate) {
  const std::string name = unique("alloc_svc");
  nerve::Server<AddTwoInts> server(node, name);
  nerve::Client<AddTwoInts> client(node, name);
  int failures = 0;
  const std::size_t n = allocations_after_warmup(
      [&](int i) {
        TwoInts req{};
        req.a = i;
        req.b = 1;
        nerve::Pending<AddTwoInts> p = client.send(req);
        nerve::Result<nerve::Request<AddTwoInts>> r = server.try_take(5s);
        if (!r.ok()) return false;
        Int out{};
        out.value = (*r)->a + (*r)->b;
        if (i % 2 == 0) {
          r->reply(out);
        } else if (!r->try_reply(out).ok()) {
          return false;
        }
        std::optional<nerve::Reply<AddTwoInts>> rep = p.wait(5s);
        return rep.has_value() && (*rep)->value == i + 1;
      },
      failures);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(failures, 0);
}

TEST_F(Alloc, BlockingCallsDoNotAllocate) {
  const std::string name = unique("alloc_call");
  std::atomic<bool> stop{false}, ready{false};
  std::size_t server_allocations = 0;
  std::thread serving([&] {
    nerve::Context c(options());
    nerve::Node n(c, node_name("alloc_server"));
    nerve::Executor e(c);
    e.serve(nerve::Server<AddTwoInts>(n, name), [](const TwoInts& r) {
      Int out{};
      out.value = r.a * 2;
      return out;
    });
    ready = true;
    for (int i = 0; i < 200 && !stop; ++i) e.spin_once(10ms);  // warm-up
    const std::size_t before = t_allocations;
    while (!stop) e.spin_once(10ms);
    server_allocations = t_allocations - before;
  });
  while (!ready) std::this_thread::yield();
  nerve::Client<AddTwoInts> client(node, name);
  ASSERT_TRUE(client.wait_for_service(30s));
  int failures = 0;
  const std::size_t n = allocations_after_warmup(
      [&](int i) {
        TwoInts req{};
        req.a = i;
        nerve::Reply<AddTwoInts> r = client.call(req, 30s);
        nerve::Result<nerve::Reply<AddTwoInts>> t = client.try_call(req, 30s);
        return r->value == 2 * i && t.ok() && (*t)->value == 2 * i;
      },
      failures);
  stop = true;
  serving.join();
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(server_allocations, 0u);  // executor dispatch of requests
}

TEST_F(Alloc, ExecutorDispatchDoesNotAllocate) {
  nerve::Executor exec(ctx);
  const std::string topic = unique("alloc_exec");
  nerve::Publisher<CmdVel> pub(node, topic);
  std::uint64_t seen = 0;
  exec.add(nerve::Subscriber<CmdVel>(node, topic, nerve::Qos::reliable()),
           [&](nerve::SampleRef<CmdVel> s) { seen = static_cast<std::uint64_t>(s->linear); });
  int ticks = 0;
  nerve::Timer t = exec.add_timer("alloc_tick", 1ms, [&] { ++ticks; });
  int failures = 0;
  const std::size_t n = allocations_after_warmup(
      [&](int i) {
        CmdVel m{};
        m.linear = static_cast<float>(i);
        pub.publish(m);
        for (int k = 0; k < 100 && seen != static_cast<std::uint64_t>(i); ++k) exec.spin_once(10ms);
        return seen == static_cast<std::uint64_t>(i);
      },
      failures);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(failures, 0);
  t.cancel();
}
