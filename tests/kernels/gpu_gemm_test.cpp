// GEMM on the device against the CPU backend: transposes, odd and large shapes, padded leading dimensions,
// strided and indexed batches, beta = 0 over a poisoned C and beta = 1 accumulation, k = 0, in fp32, bf16 and
// fp16 operands with same-type or fp32 results. Bounds scale with sqrt(k).
#include <cmath>

#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

struct GemmCase {
  bool ta, tb;
  int m, n, k, batch;
  int pad;  // extra elements per leading dimension
  float alpha, beta;
  bool indexed;
};

void run_case(Backend& gpu, CpuBackend& cpu, DType ab, DType ct, const GemmCase& c, uint64_t seed) {
  const int rows_a = c.ta ? c.k : c.m, cols_a = c.ta ? c.m : c.k;
  const int rows_b = c.tb ? c.n : c.k, cols_b = c.tb ? c.k : c.n;
  const int lda = std::max(1, cols_a) + c.pad, ldb = std::max(1, cols_b) + c.pad, ldc = std::max(1, c.n) + c.pad;
  const int64_t sa = int64_t(rows_a) * lda, sb = int64_t(rows_b) * ldb, sc = int64_t(c.m) * ldc;
  const int b_count = c.indexed ? 3 : c.batch;  // distinct B operands of an indexed batch
  const auto a = quantize(random_floats(std::max<int64_t>(1, sa * c.batch), seed), ab);
  const auto b = quantize(random_floats(std::max<int64_t>(1, sb * b_count), seed + 1), ab);
  auto c0 = quantize(random_floats(std::max<int64_t>(1, sc * c.batch), seed + 2), ct);
  const auto index = random_ints(c.batch, seed + 3, 0, b_count - 1);

  GemmArgs g;
  g.trans_a = c.ta;
  g.trans_b = c.tb;
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.alpha = c.alpha;
  g.beta = c.beta;
  g.lda = lda;
  g.ldb = ldb;
  g.ldc = ldc;
  g.batch = c.batch;
  g.stride_a = sa;
  g.stride_b = sb;
  g.stride_c = sc;

  std::vector<float> ref = c0;
  GemmArgs host = g;
  host.a = a.data();
  host.b = b.data();
  host.c = ref.data();
  host.index_b = c.indexed ? index.data() : nullptr;
  cpu.gemm(host);

  DeviceBuffer da(gpu, ab, a), db(gpu, ab, b), dc(gpu, ct, c0), di(gpu, index);
  if (c.beta == 0.0f) {  // C is not read: poison the products' elements, keep the padding's values
    auto poisoned_c = c0;
    for (int i = 0; i < c.batch; ++i)
      for (int r = 0; r < c.m; ++r)
        for (int col = 0; col < c.n; ++col) poisoned_c[i * sc + int64_t(r) * ldc + col] = NAN;
    dc.upload(poisoned_c);
  }
  GemmArgs dev = g;
  dev.a = da.get();
  dev.b = db.get();
  dev.c = dc.get();
  dev.ab = ab;
  dev.c_type = ct;
  dev.index_b = c.indexed ? di.i32() : nullptr;
  gpu.gemm(dev);
  const double scale = std::sqrt(std::max(1, c.k)) * (std::abs(c.alpha) + std::abs(c.beta));
  const Bound bound = ct == DType::f32 && ab != DType::f32 ? Bound{1e-4, 1e-5 * scale} : bound_for(ct, scale);
  EXPECT_TRUE(within(dc.download(), ref, bound))
      << "ab " << dtype_name(ab) << " c " << dtype_name(ct) << " ta " << c.ta << " tb " << c.tb << " m " << c.m << " n "
      << c.n << " k " << c.k << " batch " << c.batch << " pad " << c.pad << " beta " << c.beta << " indexed "
      << c.indexed;
}

const std::vector<GemmCase> kGemmCases = {
    {false, false, 1, 1, 1, 1, 0, 1.0f, 0.0f, false},      {false, true, 7, 13, 5, 1, 0, 1.0f, 0.0f, false},
    {true, false, 13, 7, 9, 1, 3, 0.5f, 0.0f, false},      {true, true, 33, 17, 65, 1, 1, 1.0f, 1.0f, false},
    {false, false, 64, 96, 512, 1, 0, 1.0f, 0.0f, false},  {false, true, 5, 32000, 64, 1, 0, 1.0f, 0.0f, false},
    {true, false, 512, 64, 300, 1, 0, 1.0f, 1.0f, false},   // weight gradient, accumulated
    {false, true, 11, 11, 64, 24, 0, 0.125f, 0.0f, false},  // attention scores of 24 heads
    {false, false, 11, 64, 11, 24, 2, 1.0f, 0.0f, false},   // probs x V
    {false, true, 1, 9, 32, 12, 0, 1.0f, 0.0f, true},       // decoding: hypotheses share encoder keys
    {false, false, 4, 6, 0, 2, 0, 1.0f, 0.0f, false},       // k = 0: C = 0
    {false, false, 4, 6, 0, 2, 0, 1.0f, 0.5f, false},       // k = 0: C = beta C
};

TEST_F(GpuKernels, GemmMatchesCpuInEveryPrecision) {
  uint64_t seed = 8000;
  for (DType dt : dtypes())
    for (const auto& c : kGemmCases) {
      run_case(gpu(), cpu, dt, dt, c, seed += 10);
      if (dt != DType::f32) run_case(gpu(), cpu, dt, DType::f32, c, seed += 10);
    }
}

// Decoding's wider row classes (Backend::set_matmul_row_class_growth): one algorithm, chosen at the class's row
// count, serves every row count of the class (or the shape asks its own where it cannot), for weight-shaped
// products at row counts across classes of 4 and of 16, the largest class first and last.
TEST_F(GpuKernels, GemmMatchesCpuWithWiderRowClasses) {
  uint64_t seed = 8500;
  for (int growth : {16, 4}) {
    gpu().set_matmul_row_class_growth(growth);
    for (DType dt : dtypes())
      for (int m : {2000, 1, 9, 100, 128, 130, 511, 2049, 2000})
        run_case(gpu(), cpu, dt, dt, {false, true, m, 768, 512, 1, 0, 1.0f, 0.0f, false}, seed += 10);
  }
  gpu().set_matmul_row_class_growth(2);
}

TEST_F(GpuKernels, GemmRejectsBadShapesAndTypes) {
  DeviceBuffer x(gpu(), DType::f32, 64);
  GemmArgs g;
  g.m = g.n = g.k = 4;
  g.lda = g.ldb = g.ldc = 3;  // too small
  g.a = g.b = x.get();
  g.c = x.get();
  EXPECT_THROW(gpu().gemm(g), lseq::Error);
  if (dtypes().size() == 3) {
    g.lda = g.ldb = g.ldc = 4;
    g.ab = DType::f32;
    g.c_type = DType::bf16;
    EXPECT_THROW(gpu().gemm(g), lseq::Error);
  }
}

}  // namespace
}  // namespace lseq::kernels::test
