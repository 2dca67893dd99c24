// Mixed precision on the CPU: the fp16 loss-scale state machine, its place in progress.yml, the ParamStore's
// bf16/fp16 working copy (refreshed by cast after init/upload and by the optimizer's fused write), and the
// workspace plan of a bf16 model. The CPU backend computes in fp32 only, but casts and writes 16-bit copies.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/checkpoint/checkpoint.h"
#include "core/cli/backend_select.h"
#include "core/cli/options_test_util.h"
#include "core/model/encoder_decoder_model.h"
#include "core/model/model_test_util.h"
#include "core/model/params.h"
#include "core/train/loss_scaler.h"
#include "core/train/optimizer.h"
#include "util/error.h"

namespace lseq {
namespace {

using kernels::DType;

// ---------------------------------------------------------------- LossScaler

TEST(LossScaler, StaticScalerNeverChanges) {
  LossScaler s(false);
  EXPECT_FALSE(s.dynamic());
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_FALSE(s.update(true));
  for (int i = 0; i < 3 * LossScaler::kGrowthInterval; ++i) EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 1.0);
  s.restore(1024.0, 5);
  EXPECT_EQ(s.scale(), 1.0);
}

TEST(LossScaler, OverflowHalvesAndGoodRunDoubles) {
  LossScaler s(true);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.good_steps(), 0);
  for (int64_t i = 1; i < LossScaler::kGrowthInterval; ++i) {
    ASSERT_FALSE(s.update(false)) << i;
    ASSERT_EQ(s.good_steps(), i);
  }
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_TRUE(s.update(false));  // the kGrowthInterval-th good update in a row
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.good_steps(), 0);
}

TEST(LossScaler, OverflowRestartsTheGoodRun) {
  LossScaler s(true);
  for (int64_t i = 0; i < LossScaler::kGrowthInterval - 1; ++i) s.update(false);
  EXPECT_TRUE(s.update(true));
  EXPECT_EQ(s.scale(), 32768.0);
  for (int64_t i = 0; i < LossScaler::kGrowthInterval - 1; ++i) EXPECT_FALSE(s.update(false));
  EXPECT_EQ(s.scale(), 32768.0);
}

TEST(LossScaler, RepeatedOverflowsFallBelowOne) {
  LossScaler s(true);
  for (int i = 0; i < 16; ++i) {
    s.update(true);
    EXPECT_FALSE(s.overflow_is_divergence()) << i;  // down to 1: overflows are the scale's fault, not counted
  }
  EXPECT_EQ(s.scale(), 1.0);
  s.update(true);
  EXPECT_EQ(s.scale(), 0.5);  // an overflow at scale 1: --max-nan-steps counts it
  EXPECT_TRUE(s.overflow_is_divergence());
  EXPECT_FALSE(LossScaler(false).overflow_is_divergence());
}

TEST(LossScaler, RestoreContinuesExactly) {
  LossScaler a(true);
  a.update(true);
  for (int i = 0; i < 123; ++i) a.update(false);
  LossScaler b(true);
  b.restore(a.scale(), a.good_steps());
  for (int64_t i = 0; i < 3 * LossScaler::kGrowthInterval; ++i) {
    const bool overflow = i % 1777 == 5;
    ASSERT_EQ(a.update(overflow), b.update(overflow));
    ASSERT_EQ(a.scale(), b.scale());
    ASSERT_EQ(a.good_steps(), b.good_steps());
  }
  EXPECT_THROW(b.restore(0.0, 0), Error);
  EXPECT_THROW(b.restore(8.0, -1), Error);
}

TEST(LossScaler, ProgressFileKeepsTheScaleAndOldFilesStillLoad) {
  TrainingProgress p;
  p.updates = 7;
  p.batches = 7;  // every update consumed a batch (the file is checked for that)
  p.loss_scale = 8192.0;
  p.loss_scale_good_steps = 1234;
  const TrainingProgress q = TrainingProgress::from_yaml(p.to_yaml(), "progress.yml");
  EXPECT_EQ(q.loss_scale, 8192.0);
  EXPECT_EQ(q.loss_scale_good_steps, 1234);
  EXPECT_EQ(q.updates, 7);

  TrainingProgress none;  // fp32/bf16: nothing written, nothing read back
  none.updates = 3;
  none.batches = 3;
  const std::string text = none.to_yaml();
  EXPECT_EQ(text.find("loss-scale"), std::string::npos);
  const TrainingProgress r = TrainingProgress::from_yaml(text, "progress.yml");
  EXPECT_EQ(r.loss_scale, 0.0);
  EXPECT_EQ(r.updates, 3);
}

// ---------------------------------------------------------------- ParamStore working copy

// Decodes 16-bit floats independently of the backend's conversion code.
double decode16(uint16_t h, DType dt) {
  if (dt == DType::bf16) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  }
  const int sign = h >> 15 ? -1 : 1, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  if (exp == 0) return sign * std::ldexp(static_cast<double>(mant), -24);
  return sign * std::ldexp(1.0 + mant / 1024.0, exp - 15);
}

// Every working value is the 16-bit value nearest to the master (its bit neighbours are no closer).
void expect_nearest(const std::vector<float>& master, const std::vector<uint16_t>& working, DType dt,
                    const ParamTable& table) {
  ASSERT_EQ(master.size(), working.size());
  std::size_t checked = 0;
  for (const ParamInfo& p : table.list()) {
    for (std::size_t i = p.offset; i < p.offset + p.count; ++i) {
      const double m = master[i], w = decode16(working[i], dt);
      ASSERT_TRUE(std::isfinite(w)) << p.name << " " << i;
      const double err = std::fabs(w - m);
      if (working[i] != 0 && working[i] != 0x8000) {
        ASSERT_LE(err, std::fabs(decode16(static_cast<uint16_t>(working[i] + 1), dt) - m)) << p.name << " " << i;
        ASSERT_LE(err, std::fabs(decode16(static_cast<uint16_t>(working[i] - 1), dt) - m)) << p.name << " " << i;
      }
      const double rel = dt == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
      ASSERT_LE(err, rel * std::fabs(m) + 1e-7) << p.name << " " << i;
      ++checked;
    }
  }
  EXPECT_EQ(checked, table.count());
}

ParamTable small_table() {
  ParamTable t;
  t.add("a.weight", {48, 40}, ParamInit::glorot_uniform);
  t.add("a.bias", {48}, ParamInit::zeros);
  t.add("norm.weight", {40}, ParamInit::ones);
  t.add("emb.weight", {30, 40}, ParamInit::normal_embedding);
  return t;
}

std::vector<float> host_floats(kernels::Backend& backend, const float* p, std::size_t n) {
  std::vector<float> v(n);
  backend.copy_to_host(v.data(), p, n * sizeof(float));
  return v;
}

std::vector<uint16_t> host_halves(kernels::Backend& backend, const void* p, std::size_t n) {
  std::vector<uint16_t> v(n);
  backend.copy_to_host(v.data(), p, n * sizeof(uint16_t));
  return v;
}

TEST(ParamStoreWorking, Fp32WorkingIsTheMaster) {
  auto backend = kernels::make_cpu_backend(1);
  ParamStore store(small_table(), *backend);
  EXPECT_EQ(store.working_dtype(), DType::f32);
  EXPECT_EQ(store.working(), static_cast<const void*>(store.master()));
  EXPECT_EQ(store.separate_working(), nullptr);
  const std::size_t off = store.table().find("a.bias").offset;
  EXPECT_EQ(store.weight(off), static_cast<const void*>(store.master() + off));
}

class ParamStoreHalf : public ::testing::TestWithParam<DType> {};

TEST_P(ParamStoreHalf, InitUploadAndOptimizerRefreshTheWorkingCopy) {
  const DType dt = GetParam();
  auto backend = kernels::make_cpu_backend(1);
  ParamStore store(small_table(), *backend, dt);
  const std::size_t n = store.size();
  ASSERT_NE(store.separate_working(), nullptr);
  EXPECT_EQ(store.working(), static_cast<const void*>(store.separate_working()));
  const std::size_t off = store.table().find("emb.weight").offset;
  EXPECT_EQ(store.weight(off), static_cast<const void*>(static_cast<const char*>(store.working()) + 2 * off));

  store.init(17);
  expect_nearest(host_floats(*backend, store.master(), n), host_halves(*backend, store.working(), n), dt,
                 store.table());

  std::mt19937_64 rng(5);
  const std::vector<float> fresh = test::random_floats(rng, n, 0.3);
  store.upload(fresh);
  EXPECT_EQ(host_floats(*backend, store.master(), n), fresh);
  expect_nearest(fresh, host_halves(*backend, store.working(), n), dt, store.table());

  // One Adam step writes master and working copy together.
  const std::vector<float> grads = test::random_floats(rng, n, 1.0);
  backend->copy_to_device(store.grads(), grads.data(), n * sizeof(float));
  OptimizerOptions options;
  Optimizer optimizer(*backend, n, options);
  optimizer.step(store.master(), store.grads(), 0.5f, 1e-2, store.working_dtype(), store.separate_working());
  ASSERT_FALSE(optimizer.last_step_skipped());
  const std::vector<float> updated = host_floats(*backend, store.master(), n);
  EXPECT_NE(updated, fresh);
  expect_nearest(updated, host_halves(*backend, store.working(), n), dt, store.table());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ParamStoreHalf, ::testing::Values(DType::bf16, DType::f16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(kernels::dtype_name(info.param));
                         });

// ---------------------------------------------------------------- the model's plan in 16 bits

TEST(MixedPrecisionModel, WorkspacePlanShrinksWithTheDtype) {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = 200;
  c.dim_emb = 64;
  c.enc_depth = c.dec_depth = 2;
  c.heads = 4;
  c.dim_ffn = 128;
  c.max_length = 40;
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel fp32(c, *backend);
  EncoderDecoderModel bf16(c, *backend, DType::bf16);
  EncoderDecoderModel fp16(c, *backend, DType::f16);
  EXPECT_EQ(fp32.compute_dtype(), DType::f32);
  EXPECT_EQ(bf16.compute_dtype(), DType::bf16);
  const std::size_t full = fp32.workspace_bytes(1000, 40), half = bf16.workspace_bytes(1000, 40);
  // Activations halve; LayerNorm statistics, row losses and ids stay 4 bytes, so a little more than half.
  EXPECT_LT(half, full * 6 / 10);
  EXPECT_GT(half, full / 2);
  EXPECT_EQ(fp16.workspace_bytes(1000, 40), half);
  EXPECT_EQ(bf16.num_params(), fp32.num_params());
}

// ---------------------------------------------------------------- --precision

TEST(Precision, OptionNamesTheDtypeAndTheCpuRefuses16Bits) {
  const std::pair<const char*, DType> cases[] = {
      {"fp32", DType::f32}, {"bf16", DType::bf16}, {"fp16", DType::f16}, {"bfloat16", DType::bf16}};
  for (const auto& [word, dt] : cases) {
    const auto run = testing::run_parse(App::translate, {"--model", "m", "--cpu", "--precision", word});
    ASSERT_TRUE(run.err.empty()) << run.err;
    EXPECT_EQ(precision_dtype(run.parsed.options), dt) << word;
    if (dt == DType::f32) {
      EXPECT_NE(select_backend(run.parsed.options), nullptr);
    } else {
      EXPECT_THROW(select_backend(run.parsed.options), Error) << word;
    }
  }
}

}  // namespace
}  // namespace lseq
