#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "loom/error.h"
#include "loom/types.h"

namespace loom {
namespace {

TEST(Fp16, ExactValuesRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 0.000061035156f /* smallest normal */,
                  0.000000059604645f /* smallest subnormal */}) {
    EXPECT_EQ(fp16_to_fp32(fp32_to_fp16(f)), f) << f;
  }
}

TEST(Fp16, RoundsToNearestEvenAndSaturatesToInf) {
  EXPECT_EQ(fp32_to_fp16(1.0f + 1.0f / 2048), 0x3c00);          // tie -> even (1.0)
  EXPECT_EQ(fp32_to_fp16(1.0f + 3.0f / 2048), 0x3c02);          // tie -> even (up)
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);                    // rounds to +inf
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(NAN))));
  EXPECT_EQ(fp16_to_fp32(0xfc00), -INFINITY);
}

TEST(Fp16, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // nan payloads
    EXPECT_EQ(fp32_to_fp16(fp16_to_fp32(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_fp32(fp32_to_bf16(3.140625f)), 3.140625f);
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie -> even (up)
}

TEST(Quant, BlockLayoutsMatchGguf) {
  EXPECT_EQ(traits(DType::Q8_0).type_size, 34u);
  EXPECT_EQ(traits(DType::Q4_0).type_size, 18u);
  EXPECT_EQ(row_size(DType::Q4_0, 64), 36u);
  EXPECT_THROW(row_size(DType::Q8_0, 33), Error);
}

TEST(Quant, Q4_0NibbleOrder) {
  // Element j -> low nibble of byte j; element j+16 -> high nibble.
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;  // largest magnitude: d = 1, q = 0
  x[16] = 7.0f;  // q = 15
  x[1] = 1.0f;   // q = 9
  BlockQ4_0 b;
  traits(DType::Q4_0).from_float(x.data(), &b, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), 1.0f);
  EXPECT_EQ(b.qs[0], 0x00 | (15 << 4));
  EXPECT_EQ(b.qs[1] & 0x0f, 9);
  std::vector<float> y(32);
  traits(DType::Q4_0).to_float(&b, y.data(), 32);
  EXPECT_EQ(y[0], -8.0f);
  EXPECT_EQ(y[16], 7.0f);
  EXPECT_EQ(y[1], 1.0f);
}

class QuantRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(QuantRoundTrip, ErrorWithinHalfAStep) {
  const DType type = GetParam();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  std::vector<float> x(256);
  for (auto& v : x) v = dist(rng);
  std::vector<uint8_t> q(row_size(type, 256));
  traits(type).from_float(x.data(), q.data(), 256);
  std::vector<float> y(256);
  traits(type).to_float(q.data(), y.data(), 256);
  // Q8_0 rounds to the nearest of 127 steps per side. Q4_0 maps the largest
  // magnitude to -8 steps, so the other side clamps at +7 and can be a whole
  // step off.
  const float steps = type == DType::Q4_0 ? 4.0f : type == DType::Q8_0 ? 127.0f : 0.0f;
  for (int i = 0; i < 256; ++i) {
    float amax = 0.0f;
    for (int j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float tol = steps > 0 ? amax / steps * 0.5f + 1e-3f : std::fabs(x[i]) * 1e-2f;
    EXPECT_NEAR(y[i], x[i], tol) << type_name(type) << " element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, QuantRoundTrip,
                         ::testing::Values(DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0),
                         [](const auto& info) { return std::string(type_name(info.param)); });

TEST(Types, NamesAndIds) {
  EXPECT_EQ(type_from_name("Q4_0"), DType::Q4_0);
  EXPECT_EQ(type_from_name("bf16"), DType::BF16);
  EXPECT_FALSE(type_from_name("iq2_xxs").has_value());  // a ggml type Loom does not know
  EXPECT_TRUE(is_known_type(8));
  EXPECT_FALSE(is_known_type(16));  // iq2_xxs
  EXPECT_FALSE(is_known_type(4));   // removed from ggml
}

}  // namespace
}  // namespace loom
