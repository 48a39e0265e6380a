// GoogleTest suite of the C++ API: tensor pools, tensors and their descriptors sent on
// a topic.

#include "common.hpp"

#include <vector>

using namespace nerve_test;

namespace {
struct Tens : ::testing::Test {
  nerve::Context ctx{options()};
  nerve::Node node{ctx, node_name("tensors")};
};

/// A pool name unique to this process.
std::string pool_name(const char* what) { return unique(what).substr(1); }
}  // namespace

TEST_F(Tens, WriteFreezeSendOpen) {
  nerve::TensorPool pool = nerve::TensorPool::create(ctx, pool_name("pool"), 4, 4096);
  nerve::Tensor t = pool.alloc<float>({2, 3});
  EXPECT_EQ(t.dtype(), nerve::DType::f32);
  ASSERT_EQ(t.shape().size(), 2u);
  EXPECT_EQ(t.shape()[1], 3u);
  EXPECT_EQ(t.elements(), 6u);
  EXPECT_EQ(t.size_bytes(), 6 * sizeof(float));
  EXPECT_FALSE(t.frozen());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data()) % 64, 0u);
  nerve::span<float> w = t.as<float>();
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 1.5f;

  // a descriptor needs a frozen tensor
  try {
    (void)t.descriptor();
    FAIL() << "a tensor being written has no descriptor";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_TENSOR);
  }
  t.freeze();
  EXPECT_TRUE(t.frozen());
  EXPECT_THROW(t.as<float>(), nerve::Error);  // read-only now
  EXPECT_EQ(t.view<float>()[5], 7.5f);
  try {
    (void)t.view<double>();
    FAIL() << "a wrong element type must throw";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_TYPE_MISMATCH);
  }

  // the descriptor travels on a topic; the other side opens the same memory
  const std::string topic = unique("tensors");
  nerve::Publisher<nerve::TensorDescriptor> pub(node, topic);
  nerve::Subscriber<nerve::TensorDescriptor> sub(node, topic);
  const nerve::TensorDescriptor d = t.descriptor();
  EXPECT_EQ(d.ndim, 2u);
  EXPECT_EQ(d.shape[0], 2u);
  EXPECT_EQ(d.len_bytes, 24u);
  pub.publish(d);
  auto s = sub.take(5s);
  ASSERT_TRUE(s);
  nerve::Tensor opened = nerve::Tensor::open(ctx, **s);
  EXPECT_TRUE(opened.frozen());
  EXPECT_EQ(opened.dtype(), nerve::DType::f32);
  ASSERT_EQ(opened.view<float>().size(), 6u);
  EXPECT_EQ(opened.view<float>()[4], 6.0f);
  EXPECT_EQ(opened.size_bytes(), t.size_bytes());
}

TEST_F(Tens, PoolErrors) {
  const std::string name = pool_name("small");
  nerve::TensorPool pool = nerve::TensorPool::create(ctx, name, 1, 256);
  try {
    (void)nerve::TensorPool::create(ctx, name, 1, 256);
    FAIL() << "a second pool of one name must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_TENSOR) << e.what();
  }
  nerve::TensorPool again = nerve::TensorPool::open(ctx, name);
  EXPECT_TRUE(static_cast<bool>(again));
  EXPECT_THROW(nerve::TensorPool::open(ctx, pool_name("missing")), nerve::Error);

  nerve::Tensor a = pool.alloc({16}, nerve::DType::u8);
  try {
    (void)pool.alloc({16}, nerve::DType::u8);
    FAIL() << "a full pool must fail";
  } catch (const nerve::Error& e) {
    EXPECT_EQ(e.code(), NERVE_ERR_TENSOR) << e.what();
  }
  EXPECT_THROW((void)pool.alloc({1024}, nerve::DType::f64), nerve::Error);  // larger than a slot
  a = nerve::Tensor();  // frees the slot
  nerve::Tensor b = pool.alloc<std::int32_t>({4});
  EXPECT_EQ(b.dtype(), nerve::DType::i32);
  EXPECT_THROW(nerve::Tensor().data(), nerve::Error);

  // a descriptor of the wrong size
  std::uint8_t junk[10] = {};
  nerve_tensor_t t{};
  nerve_tensor_info_t info{};
  EXPECT_EQ(nerve_tensor_open(ctx.handle(), junk, sizeof junk, &t, &info), NERVE_ERR_INVALID_ARGUMENT);
}

TEST(TensorTypes, DTypes) {
  static_assert(nerve::dtype_of<std::uint8_t>() == nerve::DType::u8);
  static_assert(nerve::dtype_of<std::int16_t>() == nerve::DType::i16);
  static_assert(nerve::dtype_of<std::uint32_t>() == nerve::DType::u32);
  static_assert(nerve::dtype_of<std::int64_t>() == nerve::DType::i64);
  static_assert(nerve::dtype_of<double>() == nerve::DType::f64);
  static_assert(nerve::dtype_of<bool>() == nerve::DType::boolean);
  EXPECT_EQ(nerve::detail::schema_of<nerve::TensorDescriptor>().hash, nerve_tensor_descriptor_hash());
}
