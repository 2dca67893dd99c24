// Elementwise ops on the device against the CPU backend: fill and cast bit for bit (every 16-bit pattern, special
// values), add/scale in every precision, deterministic sums (overwrite and accumulate), dropout with the CPU's
// masks, and the strided row gather of decoding.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

const std::vector<std::size_t> kSizes = {1, 7, 1001, (std::size_t(1) << 20) + 3};

TEST_F(GpuKernels, FillMatchesCpuBitForBit) {
  for (DType dt : dtypes())
    for (std::size_t n : kSizes)
      for (float value : {0.3f, -1e-6f, 70000.0f}) {
        DeviceBuffer y(gpu(), dt, n);
        y.poison();
        gpu().fill(dt, y.get(), n, value);
        std::vector<float> ref(n);
        if (dt == DType::f32) {
          cpu.fill(dt, ref.data(), n, value);
          EXPECT_EQ(y.download(), ref) << label(dt) << " n " << n;
        } else {
          std::vector<uint16_t> ref_bits(n);
          cpu.fill(dt, ref_bits.data(), n, value);
          EXPECT_EQ(y.download_bits(), ref_bits) << label(dt) << " n " << n << " value " << value;
        }
      }
}

TEST_F(GpuKernels, AddAndScaleMatchCpu) {
  uint64_t seed = 7300;
  for (DType dt : dtypes())
    for (std::size_t n : kSizes) {
      const auto a = quantize(random_floats(n, ++seed, -4, 4), dt), b = quantize(random_floats(n, ++seed), dt);
      std::vector<float> ref_add(n), ref_scale(n);
      cpu.add(DType::f32, a.data(), b.data(), n, ref_add.data());
      cpu.scale(DType::f32, a.data(), n, -0.37f, ref_scale.data());
      DeviceBuffer da(gpu(), dt, a), db(gpu(), dt, b), y(gpu(), dt, n);
      y.poison();
      gpu().add(dt, da.get(), db.get(), n, y.get());
      EXPECT_TRUE(within(y.download(), ref_add, bound_for(dt, 1e-3))) << label(dt) << " n " << n;
      y.poison();
      gpu().scale(dt, da.get(), n, -0.37f, y.get());
      EXPECT_TRUE(within(y.download(), ref_scale, bound_for(dt, 1e-3))) << label(dt) << " n " << n;
      // in place (y aliases a)
      gpu().add(dt, da.get(), db.get(), n, da.get());
      EXPECT_TRUE(within(da.download(), ref_add, bound_for(dt, 1e-3))) << label(dt) << " in place";
    }
}

// fp32 values that exercise rounding: ties, overflow to infinity, fp16 subnormals, NaN, infinities, zeros.
std::vector<float> special_floats() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,
                          -0.0f,
                          inf,
                          -inf,
                          std::numeric_limits<float>::quiet_NaN(),
                          65504.0f,
                          65519.99f,
                          65520.0f,
                          -65520.0f,
                          1e-8f,
                          3e-8f,
                          5.960464477539063e-08f,
                          2.9802322387695312e-08f,
                          6.1035156e-05f,
                          6.0975552e-05f,
                          3.4e38f,
                          -3.4e38f,
                          1.0f + 1.0f / 256,
                          1.0f + 3.0f / 512,
                          1.0f + 1.0f / 2048};
  const auto r = random_floats(4000, 7400, -1, 1);
  for (std::size_t i = 0; i < r.size(); ++i) v.push_back(r[i] * std::ldexp(1.0f, static_cast<int>(i % 80) - 40));
  return v;
}

TEST_F(GpuKernels, CastMatchesCpuBitForBit) {
  if (dtypes().size() < 3) GTEST_SKIP() << "casts need the 16-bit types of the GPU backend";
  // fp32 -> 16-bit
  const auto x = special_floats();
  DeviceBuffer dx(gpu(), DType::f32, x);
  for (DType dst : {DType::f16, DType::bf16}) {
    DeviceBuffer y(gpu(), dst, x.size());
    y.poison();
    gpu().cast(DType::f32, dx.get(), dst, y.get(), x.size());
    std::vector<uint16_t> ref(x.size());
    cpu.cast(DType::f32, x.data(), dst, ref.data(), x.size());
    const auto got = y.download_bits();
    for (std::size_t i = 0; i < x.size(); ++i)
      ASSERT_EQ(got[i], ref[i]) << dtype_name(dst) << " of " << x[i] << " (element " << i << ")";
  }
  // every 16-bit pattern -> fp32 and -> the other 16-bit type
  std::vector<uint16_t> all(65536);
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  for (DType src : {DType::f16, DType::bf16}) {
    DeviceBuffer ds(gpu(), src, all.size());
    gpu().copy_to_device(ds.get(), all.data(), all.size() * 2);
    DeviceBuffer wide(gpu(), DType::f32, all.size());
    wide.poison();
    gpu().cast(src, ds.get(), DType::f32, wide.get(), all.size());
    std::vector<float> ref(all.size());
    cpu.cast(src, all.data(), DType::f32, ref.data(), all.size());
    const auto got = wide.download();
    for (std::size_t i = 0; i < all.size(); ++i)
      ASSERT_EQ(float_bits(got[i]), float_bits(ref[i])) << dtype_name(src) << " pattern " << i;
    const DType other = src == DType::f16 ? DType::bf16 : DType::f16;
    DeviceBuffer narrow(gpu(), other, all.size());
    narrow.poison();
    gpu().cast(src, ds.get(), other, narrow.get(), all.size());
    std::vector<uint16_t> ref_bits(all.size());
    cpu.cast(src, all.data(), other, ref_bits.data(), all.size());
    EXPECT_EQ(narrow.download_bits(), ref_bits) << dtype_name(src) << " -> " << dtype_name(other);
  }
}

TEST_F(GpuKernels, ReduceSumOverwritesOrAccumulates) {
  uint64_t seed = 7500;
  for (std::size_t n : {std::size_t(0), std::size_t(1), std::size_t(999), std::size_t(3) << 20}) {
    const auto x = random_floats(n, ++seed, -1, 3);
    double abs_sum = 0.0;
    for (float v : x) abs_sum += std::abs(v);
    DeviceBuffer dx(gpu(), DType::f32, n == 0 ? std::vector<float>(1, 5.0f) : x);
    for (bool accumulate : {false, true}) {
      const float start = 0.625f;
      float ref = start;
      cpu.reduce_sum(x.data(), n, &ref, accumulate);
      DeviceBuffer out(gpu(), DType::f32, std::vector<float>{start});
      gpu().reduce_sum(dx.f32(), n, out.f32(), accumulate);
      const auto got = out.download();
      EXPECT_NEAR(got[0], ref, 1e-6 * (abs_sum + 1.0)) << "n " << n << " accumulate " << accumulate;
      // deterministic: a second run gives the same bits
      DeviceBuffer again(gpu(), DType::f32, std::vector<float>{start});
      gpu().reduce_sum(dx.f32(), n, again.f32(), accumulate);
      EXPECT_EQ(again.download(), got);
    }
  }
}

TEST_F(GpuKernels, DropoutDrawsTheCpuMasks) {
  uint64_t seed = 7600;
  for (DType dt : dtypes())
    for (std::size_t n : kSizes)
      for (float p : {0.0f, 0.1f, 0.5f}) {
        const auto x = quantize(random_floats(n, ++seed, 0.5f, 2.0f), dt);  // never zero: zeros come from the mask
        const Dropout drop{p, dropout_key(11, seed, 3)};
        std::vector<float> ref(n);
        cpu.dropout(DType::f32, x.data(), n, drop, ref.data());
        DeviceBuffer dx(gpu(), dt, x), y(gpu(), dt, n);
        y.poison();
        gpu().dropout(dt, dx.get(), n, drop, y.get());
        const auto got = y.download();
        std::size_t zero_mismatch = 0;
        for (std::size_t i = 0; i < n; ++i) zero_mismatch += (got[i] == 0.0f) != (ref[i] == 0.0f);
        EXPECT_EQ(zero_mismatch, 0u) << label(dt) << " n " << n << " p " << p;
        EXPECT_TRUE(within(got, ref, bound_for(dt, 0.0))) << label(dt) << " n " << n << " p " << p;
      }
  const Dropout bad{1.0f, 1};
  DeviceBuffer x(gpu(), DType::f32, 4);
  EXPECT_THROW(gpu().dropout(DType::f32, x.get(), 4, bad, x.get()), lseq::Error);
}

TEST_F(GpuKernels, GatherRowsCopiesIndexedStridedRows) {
  uint64_t seed = 7700;
  struct Case {
    int src_rows, rows;
    int64_t row_elems, src_stride, dst_stride;
    bool indexed, scattered;  // scattered: destination rows from a dst_index, a shuffle of twice as many rows
  };
  const std::vector<Case> cases = {
      {1, 1, 1, 1, 1, true, false},        {5, 8, 33, 40, 35, true, false},  {6, 6, 512, 512, 512, false, false},
      {300, 70000, 3, 7, 3, true, false},  {9, 20, 64, 72, 64, true, false}, {4, 3, 2000, 4004, 2002, true, false},
      {9, 4096, 64, 192, 64, true, true},  {7, 33, 3, 7, 5, false, true}};  // 16-byte units; 4-byte units
  for (DType dt : dtypes())
    for (const auto& c : cases) {
      const auto src = quantize(random_floats(c.src_rows * c.src_stride, ++seed), dt);
      const auto index = random_ints(c.rows, ++seed, 0, c.src_rows - 1);
      const int rows = c.indexed ? c.rows : std::min(c.rows, c.src_rows);
      const int dst_rows = c.scattered ? 2 * rows : rows;
      std::vector<int32_t> dst_index(dst_rows);
      for (int r = 0; r < dst_rows; ++r) dst_index[r] = r;
      std::mt19937 rng(static_cast<uint32_t>(++seed));
      std::shuffle(dst_index.begin(), dst_index.end(), rng);
      // gaps and rows no index names keep their values
      std::vector<float> ref = quantize(random_floats(std::size_t(dst_rows) * c.dst_stride, ++seed), dt);
      DeviceBuffer dsrc(gpu(), dt, src), dindex(gpu(), index), ddst_index(gpu(), dst_index), dst(gpu(), dt, ref);
      cpu.gather_rows(DType::f32, src.data(), c.src_stride, c.indexed ? index.data() : nullptr, rows, c.row_elems,
                      ref.data(), c.dst_stride, c.scattered ? dst_index.data() : nullptr);
      gpu().gather_rows(dt, dsrc.get(), c.src_stride, c.indexed ? dindex.i32() : nullptr, rows, c.row_elems, dst.get(),
                        c.dst_stride, c.scattered ? ddst_index.i32() : nullptr);
      EXPECT_EQ(dst.download(), ref) << label(dt) << " rows " << c.rows << " row_elems " << c.row_elems
                                     << (c.scattered ? " scattered" : "");
    }
}

}  // namespace
}  // namespace lseq::kernels::test
