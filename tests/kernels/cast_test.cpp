// cast: fp32 <-> fp16 / bf16 against bit patterns derived by hand from the IEEE formats, and round trips.
#include <cstring>

#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<uint16_t> cast_to16(Backend& be, const std::vector<float>& x, DType dt) {
  std::vector<uint16_t> y(x.size(), 0xDEAD);
  be.cast(DType::f32, x.data(), dt, y.data(), x.size());
  return y;
}

std::vector<float> cast_from16(Backend& be, const std::vector<uint16_t>& x, DType dt) {
  std::vector<float> y = poisoned(x.size());
  be.cast(dt, x.data(), DType::f32, y.data(), x.size());
  return y;
}

TEST_F(CpuKernels, CastToF16MatchesHandDerivedBits) {
  // fp16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; subnormals in units of 2^-24.
  const std::vector<std::pair<float, uint16_t>> cases = {
      {1.0f, 0x3C00},
      {-2.0f, 0xC000},
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {65504.0f, 0x7BFF},                  // largest finite
      {65519.0f, 0x7BFF},                  // below the halfway point to 65536: rounds down
      {65520.0f, 0x7C00},                  // halfway, odd mantissa: rounds (to even) up to infinity
      {1.0f / 3.0f, 0x3555},               // 0x3EAAAAAB: dropped bits 0xAAB < 0x1000, round down
      {1.0f + 1.0f / 2048.0f, 0x3C00},     // exactly half an ulp above 1: ties to even (down)
      {1.0f + 3.0f / 2048.0f, 0x3C02},     // 1.5 ulp: ties to even (up)
      {std::ldexp(1.0f, -14), 0x0400},     // smallest normal
      {std::ldexp(1.0f, -24), 0x0001},     // smallest subnormal
      {std::ldexp(1.0f, -25), 0x0000},     // half of it: ties to even, zero
      {std::ldexp(1.5f, -25), 0x0001},     // above half: rounds up
      {std::ldexp(3.0f, -25), 0x0002},     // 1.5 units: ties to even (2)
      {std::ldexp(1023.0f, -24), 0x03FF},  // largest subnormal
      {std::ldexp(2047.0f, -25), 0x0400},  // rounds up across into the smallest normal
      {std::ldexp(1.0f, -30), 0x0000},
      {std::numeric_limits<float>::infinity(), 0x7C00},
      {-std::numeric_limits<float>::infinity(), 0xFC00},
      {1e30f, 0x7C00},
  };
  std::vector<float> x;
  for (auto& c : cases) x.push_back(c.first);
  const auto y = cast_to16(backend, x, DType::f16);
  for (std::size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(y[i], cases[i].second) << "input " << cases[i].first << " (case " << i << ")";
}

TEST_F(CpuKernels, CastToBf16MatchesHandDerivedBits) {
  // bf16 is the top half of an fp32; the dropped low half rounds to nearest even.
  const std::vector<std::pair<float, uint16_t>> cases = {
      {1.0f, 0x3F80},
      {-1.0f, 0xBF80},
      {1.0f / 3.0f, 0x3EAB},            // 0x3EAAAAAB: low half 0xAAAB > 0x8000, round up
      {from_bits(0x3F808000), 0x3F80},  // tie, even upper half: stays
      {from_bits(0x3F818000), 0x3F82},  // tie, odd upper half: rounds up
      {from_bits(0x3F807FFF), 0x3F80},
      {65504.0f, 0x4780},               // 0x477FE000 rounds up to 65536
      {from_bits(0x7F7FFFFF), 0x7F80},  // largest float rounds to infinity
      {from_bits(0x00000001), 0x0000},  // fp32 subnormal rounds to zero
      {from_bits(0x00018000), 0x0002},  // subnormal tie, odd: up
      {std::numeric_limits<float>::infinity(), 0x7F80},
      {-std::numeric_limits<float>::infinity(), 0xFF80},
  };
  std::vector<float> x;
  for (auto& c : cases) x.push_back(c.first);
  const auto y = cast_to16(backend, x, DType::bf16);
  for (std::size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(y[i], cases[i].second) << "input " << cases[i].first << " (case " << i << ")";
}

TEST_F(CpuKernels, CastKeepsNaNaNaN) {
  const std::vector<float> x = {std::numeric_limits<float>::quiet_NaN(), from_bits(0x7F800001),  // signalling
                                from_bits(0xFFC00000)};
  const auto h = cast_to16(backend, x, DType::f16);
  const auto b = cast_to16(backend, x, DType::bf16);
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(h[i] & 0x7C00, 0x7C00) << i;
    EXPECT_NE(h[i] & 0x03FF, 0) << i;  // a NaN, not infinity
    EXPECT_EQ(b[i] & 0x7F80, 0x7F80) << i;
    EXPECT_NE(b[i] & 0x007F, 0) << i;
  }
  EXPECT_EQ(h[2] & 0x8000, 0x8000);
  EXPECT_EQ(b[2] & 0x8000, 0x8000);
  const auto back = cast_from16(backend, h, DType::f16);
  for (float f : back) EXPECT_TRUE(std::isnan(f));
}

TEST_F(CpuKernels, CastFrom16BitMatchesHandDerivedValues) {
  const std::vector<uint16_t> h = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x03FF, 0x0400, 0x3555, 0x7C00, 0xFC00, 0x8000};
  const std::vector<float> h_expected = {1.0f,
                                         -2.0f,
                                         65504.0f,
                                         std::ldexp(1.0f, -24),
                                         std::ldexp(1023.0f, -24),
                                         std::ldexp(1.0f, -14),
                                         1365.0f / 4096.0f,  // 0x155 | 1.0 at 2^-2
                                         std::numeric_limits<float>::infinity(),
                                         -std::numeric_limits<float>::infinity(),
                                         -0.0f};
  const auto hf = cast_from16(backend, h, DType::f16);
  for (std::size_t i = 0; i < h.size(); ++i) EXPECT_EQ(hf[i], h_expected[i]) << "fp16 bits " << h[i];
  EXPECT_TRUE(std::signbit(hf.back()));
  const std::vector<uint16_t> b = {0x3F80, 0x3EAB, 0xC2F7, 0x0001};
  const std::vector<float> b_expected = {1.0f, from_bits(0x3EAB0000), -123.5f, from_bits(0x00010000)};
  const auto bf = cast_from16(backend, b, DType::bf16);
  for (std::size_t i = 0; i < b.size(); ++i) EXPECT_EQ(bf[i], b_expected[i]) << "bf16 bits " << b[i];
}

TEST_F(CpuKernels, CastRoundTripsEvery16BitPattern) {
  // Every non-NaN 16-bit value is exactly representable in fp32, so 16 -> 32 -> 16 is the identity.
  for (DType dt : {DType::f16, DType::bf16}) {
    std::vector<uint16_t> all(65536);
    for (uint32_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
    const auto wide = cast_from16(backend, all, dt);
    const auto back = cast_to16(backend, wide, dt);
    for (uint32_t i = 0; i < all.size(); ++i) {
      if (std::isnan(wide[i])) continue;
      ASSERT_EQ(back[i], all[i]) << dtype_name(dt) << " bits " << i;
    }
  }
}

TEST_F(CpuKernels, CastRandomFloatsRoundsToTheNearest16BitValue) {
  // The result must be the nearest representable value: no neighbour is strictly closer.
  const auto x = random_floats(20000, 7, -70000.0f, 70000.0f);
  for (DType dt : {DType::f16, DType::bf16}) {
    const auto y = cast_to16(backend, x, dt);
    const auto wide = cast_from16(backend, y, dt);
    std::vector<uint16_t> neighbours(2 * y.size());
    for (std::size_t i = 0; i < y.size(); ++i) {
      neighbours[2 * i] = static_cast<uint16_t>(y[i] + 1);
      neighbours[2 * i + 1] = static_cast<uint16_t>(y[i] - 1);
    }
    const auto nwide = cast_from16(backend, neighbours, dt);
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::isinf(wide[i])) {
        ASSERT_TRUE(dt == DType::f16 && std::abs(x[i]) >= 65520.0f) << x[i];
        continue;
      }
      const double err = std::abs(static_cast<double>(wide[i]) - x[i]);
      for (int k = 0; k < 2; ++k) {
        const float other = nwide[2 * i + k];
        if (std::isnan(other) || std::isinf(other)) continue;
        ASSERT_LE(err, std::abs(static_cast<double>(other) - x[i])) << dtype_name(dt) << " " << x[i];
      }
    }
  }
}

TEST_F(CpuKernels, CastBetween16BitTypesGoesThroughFp32) {
  const std::vector<uint16_t> h = {0x3C00, 0x3555, 0x7BFF, 0x0001};  // 1, 1/3 (fp16), 65504, 2^-24
  std::vector<uint16_t> b(h.size(), 0xDEAD);
  backend.cast(DType::f16, h.data(), DType::bf16, b.data(), h.size());
  // 1 -> 0x3F80; 0.333251953125 = 0x3EAAA000 -> 0x3EAB (low half 0xA000 > 0x8000 rounds up);
  // 65504 = 0x477FE000 -> 0x4780; 2^-24 = 0x33800000 -> 0x3380.
  EXPECT_EQ(b, (std::vector<uint16_t>{0x3F80, 0x3EAB, 0x4780, 0x3380}));
}

}  // namespace
}  // namespace lseq::kernels::test
