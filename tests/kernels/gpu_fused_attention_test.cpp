// The fused attention core on the device (attention_forward/backward) against the CPU backend's twin (itself
// checked against the composed path in fused_attention_test.cpp), in fp32, bf16 and fp16: context, lse and the three
// head gradients over the projections' token-major rows (one qkv buffer for self-shaped cases, q and kv for
// cross-shaped ones), key lengths with a sentence without keys, causal masks, transformer-base shapes (8 heads
// of 64, lengths 8..128), lengths past the whole-slice kernels (up to 1024) and their dropout. Outputs are poisoned
// with NaN before each run.
#include <algorithm>

#include "fused_attention_cases.h"
#include "gpu_test_util.h"

namespace lseq::kernels::test {
namespace {

const std::vector<FusedCase> kFusedShapes = {
    {2, 3, 3, 3, 8, false, false},   {2, 2, 9, 9, 16, true, true},     {3, 2, 13, 13, 4, false, true},
    {2, 2, 30, 30, 32, true, false}, {3, 2, 9, 30, 16, false, true},   {2, 2, 5, 13, 24, false, true},
    {2, 1, 3, 7, 64, false, true},   {1, 2, 128, 128, 64, true, true}, {2, 2, 17, 100, 40, false, true}};

// transformer-base slices: 8 heads of 64, self-attention (causal and not) and cross-attention.
std::vector<FusedCase> base_shapes() {
  std::vector<FusedCase> shapes;
  for (int len : {8, 24, 57, 128}) {
    shapes.push_back({64, 8, len, len, 64, false, true});
    shapes.push_back({64, 8, len, len, 64, true, true});
  }
  shapes.push_back({64, 8, 33, 71, 64, false, true});
  return shapes;
}

// Past the whole-slice kernels (tiled_attention_cuda.cu): several key tiles, causal and not, lengths that are not
// multiples of a tile, cross-shaped (only the keys long, and a block of queries that is no whole tile), head sizes
// that are no multiple of 8 (unvectorised staging), and GPT-2's 1024 positions.
const std::vector<FusedCase> kLongShapes = {
    {2, 2, 150, 150, 64, true, true},  {2, 3, 300, 300, 64, false, true}, {3, 2, 70, 260, 40, false, true},
    {2, 2, 200, 200, 24, true, false}, {2, 2, 129, 129, 16, false, false}, {1, 4, 1024, 1024, 64, true, false},
    {2, 2, 300, 300, 12, true, true}};

// Inputs rounded to dt on both sides; the device's outputs poisoned first.
FusedOutputs run_device(Backend& gpu, DType dt, const FusedInputs& in, const Dropout& drop = Dropout{}) {
  const FusedCase& c = in.c;
  DeviceBuffer q_buf(gpu, dt, in.q_buf), kv_buf(gpu, dt, in.kv_buf), d_context(gpu, dt, in.d_context),
      lengths(gpu, in.k_lengths), context(gpu, dt, in.context_size()), lse(gpu, DType::f32, in.lse_size()),
      d_q_buf(gpu, dt, in.q_buffer()), d_kv_buf(gpu, dt, in.kv_buffer());
  context.poison(), lse.poison(), d_q_buf.poison(), d_kv_buf.poison();
  const int32_t* kl = c.with_lengths ? lengths.i32() : nullptr;
  const std::size_t size = dtype_size(dt);
  auto at = [&](DeviceBuffer& b, std::size_t offset) { return static_cast<char*>(b.get()) + offset * size; };
  DeviceBuffer& k_buf = c.fused_qkv() ? q_buf : kv_buf;
  DeviceBuffer& d_k_buf = c.fused_qkv() ? d_q_buf : d_kv_buf;
  gpu.attention_forward(dt, q_buf.get(), in.ldq, at(k_buf, in.k_offset()), at(k_buf, in.v_offset()), in.ldkv, kl,
                        c.batch, c.heads, c.q_len, c.k_len, c.head_dim, in.scale, c.causal, context.get(), lse.f32(),
                        nullptr, nullptr, drop);
  gpu.attention_backward(dt, q_buf.get(), in.ldq, at(k_buf, in.k_offset()), at(k_buf, in.v_offset()), in.ldkv, kl,
                         c.batch, c.heads, c.q_len, c.k_len, c.head_dim, in.scale, c.causal, lse.f32(),
                         context.get(), d_context.get(), d_q_buf.get(), at(d_k_buf, in.k_offset()),
                         at(d_k_buf, in.v_offset()), nullptr, nullptr, drop);
  return {context.download(), lse.download(), d_q_buf.download(),
          c.fused_qkv() ? std::vector<float>() : d_kv_buf.download()};
}

double max_abs(const std::vector<float>& x) {
  double m = 0.0;
  for (float e : x) m = std::max(m, double(std::fabs(e)));
  return m;
}

void expect_matches_cpu(CpuBackend& cpu, Backend& gpu, DType dt, const FusedCase& c, uint64_t seed,
                        const Dropout& drop = Dropout{}) {
  FusedInputs in = make_fused_inputs(c, seed);
  in.q_buf = quantize(in.q_buf, dt), in.kv_buf = quantize(in.kv_buf, dt), in.d_context = quantize(in.d_context, dt);
  FusedOutputs ref_out{std::vector<float>(in.context_size()), std::vector<float>(in.lse_size()),
                       std::vector<float>(in.q_buffer()), std::vector<float>(in.kv_buffer())};
  float* ref_d_kv = c.fused_qkv() ? ref_out.d_q_buf.data() : ref_out.d_kv_buf.data();
  cpu.attention_forward(DType::f32, in.q(), in.ldq, in.k(), in.v(), in.ldkv, in.lengths(), c.batch, c.heads, c.q_len,
                        c.k_len, c.head_dim, in.scale, c.causal, ref_out.context.data(), ref_out.lse.data(), nullptr,
                        nullptr, drop);
  cpu.attention_backward(DType::f32, in.q(), in.ldq, in.k(), in.v(), in.ldkv, in.lengths(), c.batch, c.heads,
                         c.q_len, c.k_len, c.head_dim, in.scale, c.causal, ref_out.lse.data(), ref_out.context.data(),
                         in.d_context.data(), ref_out.d_q_buf.data(), ref_d_kv + in.k_offset(),
                         ref_d_kv + in.v_offset(), nullptr, nullptr, drop);
  const FusedOutputs got_out = run_device(gpu, dt, in, drop);
  const HeadOutputs ref = head_outputs(in, ref_out), got = head_outputs(in, got_out);
  const std::string what = label(dt) + " " + c.name() + (drop.p > 0.0f ? " dropout" : "");
  // The context averages values of magnitude <= 1; gradients are bounded relative to their largest element (sums
  // over up to 128 rows of products rounded to dt, as the composed path rounds them). Every element of the
  // token-major outputs belongs to some head, so a NaN left by the poison fails these.
  EXPECT_TRUE(within(got.context, ref.context, bound_for(dt, 1.0))) << what << " context";
  for (std::size_t i = 0; i < ref_out.lse.size(); ++i)  // rows without keys: -inf on both
    if (std::isinf(ref_out.lse[i])) ASSERT_EQ(got_out.lse[i], ref_out.lse[i]) << what << " lse row " << i;
  EXPECT_TRUE(lse_close(got_out.lse, as_double(ref_out.lse), 1e-5, 1e-5)) << what << " lse";
  EXPECT_TRUE(within(got.d_q, ref.d_q, bound_for(dt, 2 * max_abs(ref.d_q)))) << what << " d_q";
  EXPECT_TRUE(within(got.d_k, ref.d_k, bound_for(dt, 2 * max_abs(ref.d_k)))) << what << " d_k";
  EXPECT_TRUE(within(got.d_v, ref.d_v, bound_for(dt, 2 * max_abs(ref.d_v)))) << what << " d_v";
  // The rows of masked keys are exactly 0, not just small.
  EXPECT_TRUE(masked_key_rows_zero(in, got.d_k)) << what << " d_k";
  EXPECT_TRUE(masked_key_rows_zero(in, got.d_v)) << what << " d_v";
}

TEST_F(GpuKernels, FusedAttentionMatchesCpu) {
  uint64_t seed = 12100;
  for (DType dt : dtypes())
    for (const auto& c : kFusedShapes) expect_matches_cpu(cpu, gpu(), dt, c, seed += 10);
}

TEST_F(GpuKernels, FusedAttentionMatchesCpuAtTransformerBaseShapes) {
  uint64_t seed = 12300;
  for (DType dt : dtypes())
    for (const auto& c : base_shapes()) expect_matches_cpu(cpu, gpu(), dt, c, seed += 10);
}

TEST_F(GpuKernels, FusedAttentionMatchesCpuPastTheWholeSliceKernels) {
  uint64_t seed = 12500;
  for (DType dt : dtypes())
    for (const auto& c : kLongShapes) expect_matches_cpu(cpu, gpu(), dt, c, seed += 10);
}

// Dropout on the probabilities (the tiled kernels draw the CPU's masks): the same values as the CPU's run with the
// same key, in every dtype.
TEST_F(GpuKernels, FusedAttentionWithDropoutMatchesCpu) {
  uint64_t seed = 12600;
  const std::vector<FusedCase> shapes = {{2, 2, 150, 150, 64, true, true},
                                         {2, 3, 300, 300, 64, false, true},
                                         {2, 2, 200, 200, 24, true, false},
                                         {3, 2, 70, 260, 40, false, true},
                                         {1, 4, 1024, 1024, 64, true, false}};
  for (DType dt : dtypes())
    for (const auto& c : shapes) {
      seed += 10;
      expect_matches_cpu(cpu, gpu(), dt, c, seed, Dropout{0.2f, seed * 7919});
    }
}

// Packed rows (q_offsets, k_offsets: the training encoder's padding-free source) against the CPU's padded run at the
// rows packing keeps; the rows it drops are never written (lse there keeps its poison).
TEST_F(GpuKernels, FusedAttentionOverPackedRowsMatchesCpu) {
  uint64_t seed = 12700;
  for (DType dt : dtypes())
    for (const auto& c : packed_cases()) {
      FusedInputs in = make_fused_inputs(c, seed += 10);
      in.q_buf = quantize(in.q_buf, dt), in.kv_buf = quantize(in.kv_buf, dt);
      in.d_context = quantize(in.d_context, dt);
      const PackedFused p = pack_case(in);
      FusedOutputs padded{std::vector<float>(in.context_size()), std::vector<float>(in.lse_size()),
                          std::vector<float>(in.q_buffer()), std::vector<float>(in.kv_buffer())};
      float* ref_d_kv = c.fused_qkv() ? padded.d_q_buf.data() : padded.d_kv_buf.data();
      cpu.attention_forward(DType::f32, in.q(), in.ldq, in.k(), in.v(), in.ldkv, in.lengths(), c.batch, c.heads,
                            c.q_len, c.k_len, c.head_dim, in.scale, c.causal, padded.context.data(), padded.lse.data());
      cpu.attention_backward(DType::f32, in.q(), in.ldq, in.k(), in.v(), in.ldkv, in.lengths(), c.batch, c.heads,
                             c.q_len, c.k_len, c.head_dim, in.scale, c.causal, padded.lse.data(),
                             padded.context.data(), in.d_context.data(),
                             padded.d_q_buf.data(), ref_d_kv + in.k_offset(), ref_d_kv + in.v_offset());
      const FusedOutputs want = packed_reference(in, p, padded);
      const PackedOperands op = packed_operands(in, p);
      const bool self = c.fused_qkv();
      DeviceBuffer q_buf(gpu(), dt, op.q_buf), kv_buf(gpu(), dt, op.kv_buf), d_context(gpu(), dt, op.d_context),
          lengths(gpu(), in.k_lengths), k_offsets(gpu(), p.k_offsets), context(gpu(), dt, want.context.size()),
          lse(gpu(), DType::f32, want.lse.size()), d_q_buf(gpu(), dt, want.d_q_buf.size()),
          d_kv_buf(gpu(), dt, want.d_kv_buf.size());
      DeviceBuffer q_offsets(gpu(), self ? p.q_offsets : std::vector<int32_t>{0});
      context.poison(), lse.poison(), d_q_buf.poison(), d_kv_buf.poison();
      const std::size_t size = dtype_size(dt);
      auto at = [&](DeviceBuffer& b, std::size_t offset) { return static_cast<char*>(b.get()) + offset * size; };
      DeviceBuffer& k_buf = self ? q_buf : kv_buf;
      DeviceBuffer& d_k_buf = self ? d_q_buf : d_kv_buf;
      const int32_t* qo = self ? q_offsets.i32() : nullptr;
      gpu().attention_forward(dt, q_buf.get(), in.ldq, at(k_buf, in.k_offset()), at(k_buf, in.v_offset()), in.ldkv,
                              lengths.i32(), c.batch, c.heads, c.q_len, c.k_len, c.head_dim, in.scale, c.causal,
                              context.get(), lse.f32(), qo, k_offsets.i32());
      gpu().attention_backward(dt, q_buf.get(), in.ldq, at(k_buf, in.k_offset()), at(k_buf, in.v_offset()), in.ldkv,
                               lengths.i32(), c.batch, c.heads, c.q_len, c.k_len, c.head_dim, in.scale, c.causal,
                               lse.f32(), context.get(), d_context.get(), d_q_buf.get(), at(d_k_buf, in.k_offset()),
                               at(d_k_buf, in.v_offset()), qo, k_offsets.i32());
      const std::string what = label(dt) + " packed " + c.name();
      EXPECT_TRUE(within(context.download(), want.context, bound_for(dt, 1.0))) << what << " context";
      const auto got_dq = d_q_buf.download();
      EXPECT_TRUE(within(got_dq, want.d_q_buf, bound_for(dt, 2 * max_abs(want.d_q_buf)))) << what << " d_q (d_qkv)";
      if (!self) {
        EXPECT_TRUE(within(d_kv_buf.download(), want.d_kv_buf, bound_for(dt, 2 * max_abs(want.d_kv_buf))))
            << what << " d_kv";
      }
      const auto got_lse = lse.download();
      for (std::size_t i = 0; i < want.lse.size(); ++i) {
        if (std::isnan(want.lse[i])) {
          EXPECT_TRUE(std::isnan(got_lse[i])) << what << " lse row " << i << " of a dropped query was written";
        } else if (std::isinf(want.lse[i])) {
          EXPECT_EQ(got_lse[i], want.lse[i]) << what << " lse row " << i;
        } else {
          EXPECT_NEAR(got_lse[i], want.lse[i], 1e-5 + 1e-5 * std::fabs(want.lse[i])) << what << " lse row " << i;
        }
      }
    }
}

// No atomics: the same inputs give the same bits.
TEST_F(GpuKernels, FusedAttentionIsReproducible) {
  const FusedCase c{16, 8, 57, 71, 64, false, true};
  for (DType dt : dtypes()) {
    FusedInputs in = make_fused_inputs(c, 12500);
    const FusedOutputs a = run_device(gpu(), dt, in), b = run_device(gpu(), dt, in);
    const std::vector<float>* outputs[][2] = {
        {&a.context, &b.context}, {&a.lse, &b.lse}, {&a.d_q_buf, &b.d_q_buf}, {&a.d_kv_buf, &b.d_kv_buf}};
    for (const auto& pair : outputs)
      for (std::size_t i = 0; i < pair[0]->size(); ++i)
        ASSERT_EQ(float_bits((*pair[0])[i]), float_bits((*pair[1])[i])) << label(dt) << " element " << i;
  }
}

}  // namespace
}  // namespace lseq::kernels::test
