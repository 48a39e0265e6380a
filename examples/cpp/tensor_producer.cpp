// Produces float32 tensors in the shared-memory tensor pool "frames" and publishes their
// descriptors on /tensors: consumers open them without copying, in Python
// (examples/python/tensor_consumer.py, crates/nerve-py/examples/tensor_consumer.py, as
// numpy arrays) or Rust (cargo run -p nerve-examples --bin tensor_consumer). Each tensor
// is filled with its index, written in place in shared memory.
//
//     tensor_producer [--shape 480,640,3] [--rate 30] [--count N] [--pool frames] [--topic /tensors]
#include <nerve.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "args.hpp"

namespace {

std::vector<std::size_t> parse_shape(const std::string& text) {
  std::vector<std::size_t> shape;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = text.find(',', pos);
    const std::string part = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    shape.push_back(static_cast<std::size_t>(std::stoull(part)));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return shape;
}

}  // namespace

int main(int argc, char** argv) try {
  const example::Args args(argc, argv);
  const std::string topic = args.str("topic", "/tensors");
  const std::string pool_name = args.str("pool", "frames");
  const std::vector<std::size_t> shape = parse_shape(args.str("shape", "480,640,3"));
  const double rate = args.num("rate", 30.0);
  const long long count = args.integer("count", -1);
  if (!(rate > 0.0) || !std::isfinite(rate)) {
    std::fprintf(stderr, "--rate must be a positive number\n");
    return 2;
  }
  nerve::install_shutdown_handlers();

  nerve::Context ctx;
  nerve::Node node(ctx, "cpp_tensor_producer");
  std::size_t elements = 1;
  for (std::size_t d : shape) elements *= d;
  auto pool = nerve::TensorPool::create(ctx, pool_name, 8, elements * sizeof(float));
  auto pub = node.publisher<nerve::TensorDescriptor>(topic);
  pub.wait_for_subscribers(1, std::chrono::seconds(10));  // then publish anyway

  const auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(1.0 / rate));
  const auto start = std::chrono::steady_clock::now();
  std::deque<nerve::Tensor> recent;  // the last few stay alive while consumers open them
  long long k = 0;
  while (!nerve::shutdown_requested() && (count < 0 || k < count)) {
    nerve::Tensor t = pool.alloc(nerve::span<const std::size_t>(shape.data(), shape.size()), nerve::DType::f32);
    for (float& x : t.as<float>()) x = static_cast<float>(k);  // in place, in shared memory
    t.freeze();                                                // read-only from now
    pub.publish(t.descriptor());
    recent.push_back(std::move(t));
    if (recent.size() > 4) recent.pop_front();  // frees the oldest slot for reuse
    ++k;
    std::this_thread::sleep_until(start + period * k);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let consumers open the last ones
  std::printf("tensor_producer: published %lld tensors\n", k);
  return 0;
} catch (const nerve::Error& e) {
  std::fprintf(stderr, "tensor_producer: %s\n", e.what());
  return 1;
}
