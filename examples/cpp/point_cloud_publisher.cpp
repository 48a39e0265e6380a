// Publishes ~10 MB point clouds (x, y, z, intensity as float32) at a few Hz on /points,
// written in place through a loan: the cloud's head and its 10 MB of points are one
// sample in shared memory, and no byte is copied on the way to any subscriber. The
// Rust `pointcloud_sub` (cargo run -p nerve-examples --bin pointcloud_sub) verifies each
// cloud's checksum: the data is filled as the Rust `pointcloud_pub` fills it.
//
//     point_cloud_publisher [--topic /points] [--bytes 10000000] [--rate 5] [--count N]
//                           [--wait-subscribers N]
#include <nerve.hpp>
#include <nerve/msgs/point_cloud.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>

#include "args.hpp"

namespace {

constexpr std::uint32_t kPointStep = 16;  // x, y, z, intensity
constexpr std::uint8_t kFloat32 = 7;      // nerve_msgs::datatype::FLOAT32

/// FNV-1a over 8-byte little-endian words (nerve_examples::checksum).
std::uint64_t checksum(const std::uint8_t* p, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t w = 0;
    std::memcpy(&w, p + i, n - i < 8 ? n - i : 8);  // little-endian hosts
    h ^= w;
    h *= 0x00000100000001b3ULL;
  }
  return h;
}

/// A pattern that depends on `seq`, its checksum in the last 8 bytes
/// (nerve_examples::fill_cloud): stands in for a lidar driver writing its scan.
void fill_cloud(nerve::span<std::uint8_t> data, std::uint64_t seq) {
  const std::size_t n = data.size() < 8 ? 0 : data.size() - 8;
  std::uint64_t x = (seq * 0x9e3779b97f4a7c15ULL) | 1;
  for (std::size_t i = 0; i < n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(data.data() + i, &x, n - i < 8 ? n - i : 8);
  }
  const std::uint64_t c = checksum(data.data(), n);
  std::memcpy(data.data() + n, &c, data.size() - n < 8 ? data.size() - n : 8);
}

nerve::msgs::PointField field(const char* name, std::uint32_t offset) {
  nerve::msgs::PointField f{};
  f.name.assign(name);
  f.offset = offset;
  f.datatype = kFloat32;
  f.count = 1;
  return f;
}

}  // namespace

int main(int argc, char** argv) try {
  const example::Args args(argc, argv);
  const std::string topic = args.str("topic", "/points");
  const auto bytes = static_cast<std::size_t>(args.integer("bytes", 10'000'000));
  const double rate = args.num("rate", 5.0);
  const auto count = args.integer("count", -1);
  const auto wait_subscribers = static_cast<std::size_t>(args.integer("wait-subscribers", 0));
  if (!(rate > 0.0) || !std::isfinite(rate) || bytes < 8) {
    std::fprintf(stderr, "--rate must be positive and --bytes at least 8\n");
    return 2;
  }
  nerve::install_shutdown_handlers();

  nerve::Context ctx;
  nerve::Node node(ctx, "cpp_point_cloud_publisher");
  // sensor QoS (newest wins, a slow reader never slows the publisher), with room for a
  // cloud's head in front of its data
  nerve::Qos qos = nerve::Qos::sensor();
  qos.max_payload = bytes + 4096;
  auto points = node.publisher<nerve::msgs::PointCloud>(topic, qos);
  if (wait_subscribers > 0 && !points.wait_for_subscribers(wait_subscribers, std::chrono::seconds(10))) {
    std::fprintf(stderr, "no subscriber on %s within 10 s\n", topic.c_str());
    return 1;
  }
  std::printf("point_cloud_publisher: %zu byte clouds on %s at %g Hz\n", bytes, topic.c_str(), rate);
  std::fflush(stdout);

  const auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(1.0 / rate));
  const auto start = std::chrono::steady_clock::now();
  long long k = 0;
  while (!nerve::shutdown_requested() && (count < 0 || k < count)) {
    auto cloud = points.loan(bytes);  // head + `bytes` point bytes, in shared memory
    cloud->header.stamp.nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
    cloud->header.frame_id.assign("lidar");
    cloud->height = 1;
    cloud->width = static_cast<std::uint32_t>(bytes / kPointStep);
    cloud->point_step = kPointStep;
    cloud->row_step = static_cast<std::uint32_t>(bytes / kPointStep * kPointStep);
    cloud->is_dense = 1;
    cloud->fields[0] = field("x", 0);
    cloud->fields[1] = field("y", 4);
    cloud->fields[2] = field("z", 8);
    cloud->fields[3] = field("intensity", 12);
    cloud->field_count = 4;
    fill_cloud(cloud.elems(), static_cast<std::uint64_t>(k + 1));  // straight into shared memory
    points.send(std::move(cloud));
    ++k;
    std::this_thread::sleep_until(start + period * k);
  }
  std::printf("point_cloud_publisher: sent %lld clouds\n", k);
  return 0;
} catch (const nerve::Error& e) {
  std::fprintf(stderr, "point_cloud_publisher: %s\n", e.what());
  return 1;
}
