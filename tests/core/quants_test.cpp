// The quantized types' layouts, sizes and reference round trips.
//
// Layout tests fill a block's bytes with known pseudo-random values (scales
// that are powers of two, so every product is exact), then decode it here
// independently, walking the elements in the order llama.cpp's
// dequantize_row_* loops do (ggml-quants.c), and compare every element. The
// spot checks decode a single element by hand from the layout description.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "loom/types.h"

namespace loom {
namespace {

constexpr uint16_t kHalf = 0x3800;     // fp16 0.5
constexpr uint16_t kQuarter = 0x3400;  // fp16 0.25

template <class Block>
Block random_block(uint32_t seed) {
  Block b;
  std::mt19937 rng(seed);
  auto* bytes = reinterpret_cast<uint8_t*>(&b);
  for (size_t i = 0; i < sizeof(Block); ++i) bytes[i] = static_cast<uint8_t>(rng());
  return b;
}

template <class Block>
std::vector<float> decode(DType type, const Block& b) {
  EXPECT_EQ(traits(type).type_size, sizeof(Block));
  std::vector<float> y(traits(type).block_size);
  traits(type).to_float(&b, y.data(), traits(type).block_size);
  return y;
}

void expect_same(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "element " << i;
}

TEST(QuantLayout, Q4_1) {
  auto b = random_block<BlockQ4_1>(1);
  b.d = kHalf;
  b.m = kQuarter;
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[j] = (b.qs[j] & 15) * 0.5f + 0.25f;
    want[j + 16] = (b.qs[j] >> 4) * 0.5f + 0.25f;
  }
  expect_same(decode(DType::Q4_1, b), want);
  b.qs[3] = 0xa7;  // element 3 = 7, element 19 = 10
  EXPECT_EQ(decode(DType::Q4_1, b)[3], 7 * 0.5f + 0.25f);
  EXPECT_EQ(decode(DType::Q4_1, b)[19], 10 * 0.5f + 0.25f);
}

TEST(QuantLayout, Q5_0AndQ5_1) {
  auto b = random_block<BlockQ5_0>(2);
  b.d = kHalf;
  const uint32_t qh = b.qh[0] | b.qh[1] << 8 | b.qh[2] << 16 | static_cast<uint32_t>(b.qh[3]) << 24;
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[j] = ((b.qs[j] & 15) + 16 * static_cast<int>((qh >> j) & 1) - 16) * 0.5f;
    want[j + 16] = ((b.qs[j] >> 4) + 16 * static_cast<int>((qh >> (j + 16)) & 1) - 16) * 0.5f;
  }
  expect_same(decode(DType::Q5_0, b), want);
  // Element 25: high nibble of qs[9], 5th bit = bit 1 of qh[3].
  b.qs[9] = 0x30;
  b.qh[3] = 0x02;
  EXPECT_EQ(decode(DType::Q5_0, b)[25], (3 + 16 - 16) * 0.5f);

  auto c = random_block<BlockQ5_1>(3);
  c.d = kHalf;
  c.m = kQuarter;
  const uint32_t ch = c.qh[0] | c.qh[1] << 8 | c.qh[2] << 16 | static_cast<uint32_t>(c.qh[3]) << 24;
  for (int j = 0; j < 16; ++j) {
    want[j] = ((c.qs[j] & 15) + 16 * static_cast<int>((ch >> j) & 1)) * 0.5f + 0.25f;
    want[j + 16] = ((c.qs[j] >> 4) + 16 * static_cast<int>((ch >> (j + 16)) & 1)) * 0.5f + 0.25f;
  }
  expect_same(decode(DType::Q5_1, c), want);
}

TEST(QuantLayout, IQ4_NL) {
  auto b = random_block<BlockIQ4_NL>(4);
  b.d = kHalf;
  const int values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[j] = 0.5f * values[b.qs[j] & 15];
    want[j + 16] = 0.5f * values[b.qs[j] >> 4];
  }
  expect_same(decode(DType::IQ4_NL, b), want);
}

TEST(QuantLayout, MXFP4) {
  auto b = random_block<BlockMXFP4>(5);
  b.e = 127;  // 2^0
  // e2m1: sign bit, 2 exponent bits (bias 1), 1 mantissa bit.
  auto e2m1 = [](int n) {
    const int e = (n >> 1) & 3, m = n & 1;
    const float mag = e == 0 ? 0.5f * m : std::ldexp(1.0f + 0.5f * m, e - 1);
    return n & 8 ? -mag : mag;
  };
  std::vector<float> want(32);
  for (int j = 0; j < 16; ++j) {
    want[j] = e2m1(b.qs[j] & 15);
    want[j + 16] = e2m1(b.qs[j] >> 4);
  }
  expect_same(decode(DType::MXFP4, b), want);
  b.e = 130;  // 2^3
  b.qs[0] = 0x07;  // 6 * 8
  EXPECT_EQ(decode(DType::MXFP4, b)[0], 48.0f);
  EXPECT_EQ(decode(DType::MXFP4, b)[16], 0.0f);
}

TEST(QuantLayout, Q2_K) {
  auto b = random_block<BlockQ2_K>(6);
  b.d = kHalf;
  b.dmin = kQuarter;
  std::vector<float> want;
  int is = 0;
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b.qs + 32 * half;
    for (int shift = 0; shift < 8; shift += 2) {
      for (int part = 0; part < 2; ++part) {
        const int sc = b.scales[is++];
        for (int l = 0; l < 16; ++l)
          want.push_back(0.5f * (sc & 15) * ((q[16 * part + l] >> shift) & 3) - 0.25f * (sc >> 4));
      }
    }
  }
  expect_same(decode(DType::Q2_K, b), want);
  // Element 170 = 128 + 32 * 1 + 10: bits 2-3 of qs[42], sub-block 10.
  b.qs[42] = 0x0c;  // q = 3
  b.scales[10] = 0x52;
  EXPECT_EQ(decode(DType::Q2_K, b)[170], 0.5f * 2 * 3 - 0.25f * 5);
}

TEST(QuantLayout, Q3_K) {
  auto b = random_block<BlockQ3_K>(7);
  b.d = kHalf;
  // The 16 scales: 4 low bits from bytes 0-7 (low nibbles, then high
  // nibbles), 2 high bits from bytes 8-11.
  int scales[16];
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? b.scales[i] & 15 : b.scales[i - 8] >> 4;
    scales[i] = low | ((b.scales[8 + i % 4] >> (2 * (i / 4))) & 3) << 4;
  }
  std::vector<float> want;
  int is = 0;
  uint8_t m = 1;
  for (int half = 0; half < 2; ++half) {
    const uint8_t* q = b.qs + 32 * half;
    for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
      for (int part = 0; part < 2; ++part) {
        const float dl = 0.5f * (scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          const int k = 16 * part + l;
          want.push_back(dl * (((q[k] >> shift) & 3) - ((b.hmask[k] & m) ? 0 : 4)));
        }
      }
    }
  }
  expect_same(decode(DType::Q3_K, b), want);
  // Element 200 = 128 + 64 + 8: bits 4-5 of qs[40], bit 6 of hmask[8],
  // sub-block 12: low bits = high nibble of scales[4], high bits = bits 6-7 of scales[8].
  b.qs[40] = 0x20;     // low bits 2
  b.hmask[8] = 0x40;   // high bit set: q = 2
  b.scales[4] = 0x90;  // low 4 bits of the scale: 9
  b.scales[8] = 0x80;  // high 2 bits: 2 -> scale 41, minus 32 = 9
  EXPECT_EQ(decode(DType::Q3_K, b)[200], 0.5f * 9 * 2);
}

// Q4_K / Q5_K scale and min of sub-block j, 6 bits each.
void scale_min(const uint8_t* s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = s[j] & 63;
    m = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
    m = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
}

TEST(QuantLayout, Q4_K) {
  auto b = random_block<BlockQ4_K>(8);
  b.d = kHalf;
  b.dmin = kQuarter;
  std::vector<float> want;
  for (int c = 0; c < 4; ++c) {
    int sc1, m1, sc2, m2;
    scale_min(b.scales, 2 * c, sc1, m1);
    scale_min(b.scales, 2 * c + 1, sc2, m2);
    for (int l = 0; l < 32; ++l) want.push_back(0.5f * sc1 * (b.qs[32 * c + l] & 15) - 0.25f * m1);
    for (int l = 0; l < 32; ++l) want.push_back(0.5f * sc2 * (b.qs[32 * c + l] >> 4) - 0.25f * m2);
  }
  expect_same(decode(DType::Q4_K, b), want);
  // Element 230 = 192 + 32 + 6: high nibble of qs[102], sub-block 7: scale =
  // low nibble of scales[11] | top bits of scales[3] << 4, min = high nibble
  // of scales[11] | top bits of scales[7] << 4.
  b.qs[102] = 0x50;
  b.scales[11] = 0x23;  // scale low 3, min low 2
  b.scales[3] = 0x40;   // scale high 1 -> 19
  b.scales[7] = 0x80;   // min high 2 -> 34
  EXPECT_EQ(decode(DType::Q4_K, b)[230], 0.5f * 19 * 5 - 0.25f * 34);
}

TEST(QuantLayout, Q5_K) {
  auto b = random_block<BlockQ5_K>(9);
  b.d = kHalf;
  b.dmin = kQuarter;
  std::vector<float> want;
  uint8_t u1 = 1, u2 = 2;
  for (int c = 0; c < 4; ++c, u1 <<= 2, u2 <<= 2) {
    int sc1, m1, sc2, m2;
    scale_min(b.scales, 2 * c, sc1, m1);
    scale_min(b.scales, 2 * c + 1, sc2, m2);
    for (int l = 0; l < 32; ++l)
      want.push_back(0.5f * sc1 * ((b.qs[32 * c + l] & 15) + (b.qh[l] & u1 ? 16 : 0)) - 0.25f * m1);
    for (int l = 0; l < 32; ++l)
      want.push_back(0.5f * sc2 * ((b.qs[32 * c + l] >> 4) + (b.qh[l] & u2 ? 16 : 0)) - 0.25f * m2);
  }
  expect_same(decode(DType::Q5_K, b), want);
}

TEST(QuantLayout, Q6_K) {
  auto b = random_block<BlockQ6_K>(10);
  b.d = kHalf;
  std::vector<float> want(256);
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = b.ql + 64 * half;
    const uint8_t* qh = b.qh + 32 * half;
    const int8_t* sc = b.scales + 8 * half;
    float* y = want.data() + 128 * half;
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      y[l] = 0.5f * sc[is] * (((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32);
      y[l + 32] = 0.5f * sc[is + 2] * (((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
      y[l + 64] = 0.5f * sc[is + 4] * (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      y[l + 96] = 0.5f * sc[is + 6] * (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
  expect_same(decode(DType::Q6_K, b), want);
  // Element 100 = 96 + 4: high nibble of ql[36], bits 6-7 of qh[4], scales[6].
  b.ql[36] = 0xf0;
  b.qh[4] = 0x40;  // q = 15 | 1 << 4 = 31
  b.scales[6] = -3;
  EXPECT_EQ(decode(DType::Q6_K, b)[100], 0.5f * -3 * (31 - 32));
}

TEST(QuantLayout, IQ4_XS) {
  auto b = random_block<BlockIQ4_XS>(11);
  b.d = kHalf;
  const int values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  std::vector<float> want;
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | ((b.scales_h >> (2 * ib)) & 3) << 4;
    std::vector<float> sub(32);
    for (int j = 0; j < 16; ++j) {
      sub[j] = 0.5f * (ls - 32) * values[b.qs[16 * ib + j] & 15];
      sub[j + 16] = 0.5f * (ls - 32) * values[b.qs[16 * ib + j] >> 4];
    }
    want.insert(want.end(), sub.begin(), sub.end());
  }
  expect_same(decode(DType::IQ4_XS, b), want);
  // Sub-block 5: high nibble of scales_l[2], bits 10-11 of scales_h.
  b.scales_l[2] = 0x40;
  b.scales_h = 0x0800;  // ls = 4 | 2 << 4 = 36
  b.qs[80] = 0x0f;      // element 160: value 113
  EXPECT_EQ(decode(DType::IQ4_XS, b)[160], 0.5f * 4 * 113);
}

TEST(QuantLayout, SizesMatchGguf) {
  struct Want {
    DType type;
    int id, block;
    size_t bytes;
    const char* name;
  };
  // ggml.h ids, ggml-common.h block sizes, ggml.c names.
  const Want list[] = {{DType::Q4_1, 3, 32, 20, "q4_1"},    {DType::Q5_0, 6, 32, 22, "q5_0"},
                       {DType::Q5_1, 7, 32, 24, "q5_1"},    {DType::Q2_K, 10, 256, 84, "q2_K"},
                       {DType::Q3_K, 11, 256, 110, "q3_K"}, {DType::Q4_K, 12, 256, 144, "q4_K"},
                       {DType::Q5_K, 13, 256, 176, "q5_K"}, {DType::Q6_K, 14, 256, 210, "q6_K"},
                       {DType::IQ4_NL, 20, 32, 18, "iq4_nl"}, {DType::IQ4_XS, 23, 256, 136, "iq4_xs"},
                       {DType::MXFP4, 39, 32, 17, "mxfp4"}};
  for (const Want& w : list) {
    EXPECT_EQ(static_cast<int>(w.type), w.id) << w.name;
    EXPECT_TRUE(is_known_type(w.id)) << w.name;
    const TypeTraits& t = traits(w.type);
    EXPECT_EQ(t.name, w.name);
    EXPECT_EQ(t.block_size, w.block) << w.name;
    EXPECT_EQ(t.type_size, w.bytes) << w.name;
    EXPECT_TRUE(t.is_quantized) << w.name;
    EXPECT_EQ(type_from_name(w.name), w.type) << w.name;
    for (int64_t n : {256, 512, 4096}) EXPECT_EQ(row_size(w.type, n), n / w.block * w.bytes) << w.name << " " << n;
  }
  EXPECT_EQ(type_from_name("Q4_K_M"), std::nullopt);
  EXPECT_EQ(type_from_name("Q6_K"), DType::Q6_K);
  EXPECT_EQ(sizeof(BlockQ8_K), 292u);
}

// Quantize -> dequantize on N(0, 1) data (with a few outliers): the RMSE
// relative to the data's RMS must stay within the bound. Measured (seed 42):
// q4_0 .093, q4_1 .078, q5_0 .046, q5_1 .039, q8_0 .0058, q2_K .307, q3_K .160,
// q4_K .073, q5_K .037, q6_K .0186, iq4_nl .081, iq4_xs .081, mxfp4 .119;
// the bounds leave ~1.5x room. The quantizers follow llama.cpp's searches
// (src/core/quants_k.cpp); tests/parity/run-quantize-parity checks that they
// write the same bytes as llama.cpp's quantizer.
struct RoundTrip {
  DType type;
  double max_rel_rmse;
};

class QuantRoundTripRmse : public ::testing::TestWithParam<RoundTrip> {};

TEST_P(QuantRoundTripRmse, WithinBound) {
  const auto [type, bound] = GetParam();
  const int64_t n = 4096;
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  x[100] = 9.0f;  // outliers, as real weights have
  x[3000] = -7.5f;
  std::vector<uint8_t> q(row_size(type, n));
  traits(type).from_float(x.data(), q.data(), n);
  std::vector<float> y(n);
  traits(type).to_float(q.data(), y.data(), n);
  double err = 0.0, norm = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    norm += double(x[i]) * x[i];
  }
  const double rel = std::sqrt(err / norm);
  std::printf("%s: relative rmse %.4f (bound %.4f)\n", std::string(type_name(type)).c_str(), rel, bound);
  EXPECT_LT(rel, bound) << type_name(type);
  // An all-zero row stays zero, and a constant row is exact up to fp16 scales.
  std::vector<float> zeros(n, 0.0f), back(n, 1.0f);
  traits(type).from_float(zeros.data(), q.data(), n);
  traits(type).to_float(q.data(), back.data(), n);
  for (float v : back) ASSERT_EQ(v, 0.0f) << type_name(type);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantRoundTripRmse,
                         ::testing::Values(RoundTrip{DType::Q4_0, 0.15}, RoundTrip{DType::Q4_1, 0.15},
                                           RoundTrip{DType::Q5_0, 0.08}, RoundTrip{DType::Q5_1, 0.08},
                                           RoundTrip{DType::Q8_0, 0.01}, RoundTrip{DType::Q2_K, 0.45},
                                           RoundTrip{DType::Q3_K, 0.25}, RoundTrip{DType::Q4_K, 0.12},
                                           RoundTrip{DType::Q5_K, 0.06}, RoundTrip{DType::Q6_K, 0.03},
                                           RoundTrip{DType::IQ4_NL, 0.12}, RoundTrip{DType::IQ4_XS, 0.12},
                                           RoundTrip{DType::MXFP4, 0.25}),
                         [](const auto& info) { return std::string(type_name(info.param.type)); });

TEST(QuantQ8_K, RoundTripAndBlockSums) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(512);
  for (auto& v : x) v = dist(rng);
  std::vector<BlockQ8_K> q(2);
  quantize_row_q8_k(x.data(), q.data(), 512);
  std::vector<float> y(512);
  dequantize_row_q8_k(q.data(), y.data(), 512);
  for (int b = 0; b < 2; ++b) {
    float amax = 0.0f;
    for (int j = 0; j < 256; ++j) amax = std::max(amax, std::fabs(x[256 * b + j]));
    EXPECT_FLOAT_EQ(std::fabs(q[b].d), amax / 127.0f);
    for (int j = 0; j < 256; ++j) EXPECT_NEAR(y[256 * b + j], x[256 * b + j], amax / 127.0f * 0.5001f);
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += q[b].qs[16 * g + j];
      EXPECT_EQ(q[b].bsums[g], sum);
    }
  }
}

}  // namespace
}  // namespace loom
