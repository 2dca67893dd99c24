// Training throughput of a Transformer preset (issue 5's benchmark): target tokens/s, ms per step, model FLOPs
// utilisation and device memory, for batches of given target-token budgets drawn from a WMT-like length
// distribution (wmt_batches.h). Each case: `--pool` distinct batches, `--warmup` untimed steps, then `--steps`
// timed steps of the whole update (forward_backward with gradients in step memory, as lstrain has for updates of
// one batch, then Optimizer::step), cycling the pool from its first
// batch, between two backend synchronisations. Reports one RESULT line per case (bench_support.h); never asserts.
// Usage: bench_train_throughput [--preset configs/transformer-base.yaml] [--tokens 4096 8192 16384]
//   [--precision fp32|bf16|fp16 (default bf16, fp32 with --cpu)] [--cpu] [--cpu-threads N] [--devices N]
//   [--dim-vocabs 32000] [--warmup 10] [--steps 32] [--pool 16] [--seed 1] [--peak-flops 989e12]
//   [--plan lstrain|worst] [--plan-only] [--recompute-ffn] [--dump-batches FILE] [--dump-only]
// (the benchmarks' options: bench_train_throughput --help; --dim-vocabs 0 keeps the preset's vocabulary sizes)
// --recompute-ffn: lstrain's option of that name (impl=lseq-recompute-ffn in the RESULT lines).
// --dump-batches writes every case's batch shapes for bench/pytorch_train.py (--dump-only: and stops there,
// needing no device).
// --plan-only prints each case's workspace plan (what its batches need, counted over the planning backend) and the
// counted model and optimizer state, and runs no step: memory changes can be studied on the CPU backend.
#include <fmt/format.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bench_support.h"
#include "core/cli/app_main.h"
#include "core/model/encoder_decoder_model.h"
#include "core/train/optimizer.h"
#include "kernels/workspace.h"
#include "util/error.h"
#include "wmt_batches.h"

namespace {

using namespace lseq;

// lstrain's optimizer settings from the preset (--optimizer-params, --clip-norm, --weight-decay), except
// exponential smoothing, which is off: the PyTorch peer keeps no smoothed copy, and the work must be equal.
OptimizerOptions preset_optimizer(const Options& options) {
  OptimizerOptions o;
  const std::vector<double> p = options.get_floats("optimizer-params");
  if (p.size() > 0) o.beta1 = static_cast<float>(p[0]);
  if (p.size() > 1) o.beta2 = static_cast<float>(p[1]);
  if (p.size() > 2) o.eps = static_cast<float>(p[2]);
  o.weight_decay = static_cast<float>(options.get_float("weight-decay"));
  o.clip_norm = static_cast<float>(options.get_float("clip-norm"));
  o.smoothing = 0.0f;
  return o;
}

const char* tied_name(TiedEmbeddings t) {
  switch (t) {
    case TiedEmbeddings::none: return "none";
    case TiedEmbeddings::target: return "target";
    case TiedEmbeddings::source: return "source";
    case TiedEmbeddings::all: return "all";
  }
  return "?";
}

void print_status(const std::string& prefix, const char* status, const std::string& reason) {
  fmt::print("{} status={} reason={}\n", prefix, status, bench::one_word(reason));
  std::fflush(stdout);
}

int run(const Options& options) {
  const std::string preset_path = options.get_string("preset");
  const std::vector<int64_t> budgets = options.get_ints("tokens");
  const std::string precision = bench::precision(options);
  const bool cpu = options.get_bool("cpu");
  const int warmup = static_cast<int>(options.get_int("warmup"));
  const int steps = static_cast<int>(bench::int_or(options, "steps", 32));
  const int pool = static_cast<int>(options.get_int("pool"));
  const uint64_t seed = static_cast<uint64_t>(options.get_int("seed"));
  const double peak_flops = options.get_float("peak-flops");
  const bool worst = options.get_string("plan") == "worst";
  const bool recompute_ffn = options.get_bool("recompute-ffn");
  const bool plan_only = options.get_bool("plan-only");
  const std::string dump_path = options.get_string("dump-batches");
  if (budgets.empty()) fail("--tokens needs at least one budget");

  // Sentences up to 250 tokens (+ eos/bos): the model's --max-length is 250 whatever the preset says.
  bench::Preset preset =
      bench::load_preset(preset_path, bench::vocab_sizes(options, 32000), bench::kLongestSentence);
  const ModelConfig& config = preset.config;

  std::vector<std::vector<bench::BatchShape>> shapes;
  for (std::size_t i = 0; i < budgets.size(); ++i) {
    shapes.push_back(bench::wmt_like_batches(budgets[i], pool, seed));
    if (!dump_path.empty()) bench::write_batch_shapes(dump_path, budgets[i], seed, shapes.back(), i > 0);
  }
  if (options.get_bool("dump-only")) return 0;

  auto prefix_of = [&](int64_t budget) {
    return fmt::format("RESULT bench=train impl={} model={} precision={} tokens={} pool={} warmup={} steps={}",
                       recompute_ffn ? "lseq-recompute-ffn" : "lseq", preset.name, precision, budget, pool, warmup,
                       steps);
  };
  // Before the backend: its baseline excludes nothing of ours.
  bench::DeviceMemoryProbe memory(!cpu, bench::device(options));
  std::unique_ptr<kernels::Backend> backend;
  kernels::DType dt = kernels::DType::f32;
  try {
    // A plan needs only the dtype's sizes: bf16/fp16 plans are made over the CPU backend too (which stores
    // 16-bit tensors, but computes only in fp32).
    const bool plan_only_on_cpu = plan_only && cpu;
    backend = bench::make_backend(preset.options, options, plan_only_on_cpu ? "fp32" : precision);
    preset.options.set("precision", YAML::Node(precision));
    dt = precision_dtype(preset.options);
  } catch (const Error& e) {
    for (int64_t budget : budgets) print_status(prefix_of(budget), "not-measured", e.what());
    return 0;
  }
  fmt::print("# backend {}; preset {}: dim {}, {}+{} layers, {} heads, ffn {}, vocab {}/{}, tied {}\n",
             backend->name(), preset_path, config.dim_emb, config.enc_depth, config.dec_depth, config.heads,
             config.dim_ffn, config.src_vocab, config.tgt_vocab, tied_name(config.tied));

  std::unique_ptr<EncoderDecoderModel> model;
  std::unique_ptr<Optimizer> optimizer;
  try {
    model = std::make_unique<EncoderDecoderModel>(config, *backend, dt);
    model->init_params(1);
    model->set_recompute_ffn(recompute_ffn);
    model->set_gradients_in_step_memory(true);  // as lstrain does for updates of one batch
    optimizer = std::make_unique<Optimizer>(*backend, model->num_params(), preset_optimizer(preset.options));
  } catch (const Error& e) {
    for (int64_t budget : budgets) print_status(prefix_of(budget), "not-measured", e.what());
    return 0;
  }
  memory.sample();
  // Parameters (fp32 master, the bf16/fp16 working copy), Adam's two moments and the gradients that live between
  // steps (with gradients in step memory: the embedding tables' side buffer; the rest is in the workspace plan):
  // counted, and as the driver saw it (the latter also holds the backend's scratch, cuBLAS and allocation
  // rounding).
  const std::size_t separate_working = model->param_store().separate_working() ? kernels::dtype_size(dt) : 0;
  const std::size_t persistent_grads =
      model->gradients_in_step_memory() ? model->param_store().side_end() : model->num_params();
  const std::size_t state_bytes = model->num_params() * (4 + 8 + separate_working) + persistent_grads * 4;
  const double flops_per_token = bench::train_flops_per_token(model->params(), config);
  fmt::print("# {} weights ({} in the flat buffers); {:.4f} GFLOP per target token (6 x {} weights a token passes "
             "through); model and optimizer state {} MiB counted, {} MiB on the device with the backend's own\n",
             model->num_weights(), model->num_params(), flops_per_token / 1e9, flops_per_token / 6,
             bench::mib(state_bytes), memory.valid() ? bench::mib(memory.peak_bytes()) : std::string("na"));
  const float grad_scale = dt == kernels::DType::f16 ? 1024.0f : 1.0f;  // fp16: a fixed loss scale

  for (std::size_t c = 0; c < budgets.size(); ++c) {
    const std::string prefix = prefix_of(budgets[c]);
    try {
      std::vector<data::Batch> batches;
      int64_t max_side_tokens = 0, sentences = 0, real_tokens = 0, padded_tokens = 0;
      for (std::size_t i = 0; i < shapes[c].size(); ++i) {
        batches.push_back(bench::make_batch(shapes[c][i], config.src_vocab, config.tgt_vocab, seed * 7919 + i));
        const data::Batch& b = batches.back();
        max_side_tokens = std::max<int64_t>({max_side_tokens, int64_t(b.size) * b.src_len,
                                             int64_t(b.size) * b.tgt_len});
        sentences += b.size;
        real_tokens += b.tgt_tokens();
        padded_tokens += int64_t(b.size) * b.tgt_len;
      }
      // --plan lstrain (default): as lstrain now does, the workspace starts empty and grows to what the
      // batches need (EncoderDecoderModel::step_bytes); it is grown here to the pool's largest need before the
      // warm-up so that no growth falls into the timed steps. --plan worst holds from the start what lstrain checks at
      // startup: the plan for --max-length 250 and a budget of the pool's largest side, enough for any batch
      // of the distribution. Both sizes are printed.
      const int max_len = config.max_length + 1;
      const std::size_t worst_plan = model->workspace_bytes(std::max<int64_t>(max_side_tokens, max_len), max_len);
      std::size_t pool_need = 0;
      for (const data::Batch& b : batches) pool_need = std::max(pool_need, model->step_bytes(b, true));
      if (plan_only) {
        fmt::print("PLAN{} state_mib={} ws_need_mib={} ws_worst_mib={}\n", prefix.substr(prefix.find(' ')),
                   bench::mib(state_bytes), bench::mib(pool_need), bench::mib(worst_plan));
        continue;
      }
      memory.start_case();  // the previous case's workspace is freed
      kernels::Workspace ws(*backend, worst ? worst_plan : 0,
                            "bench_train_throughput: the workspace plan is too small");
      ws.ensure(pool_need);
      memory.sample();

      int64_t step_counter = 0, timed_tokens = 0, timed_sentences = 0;
      auto update = [&](const data::Batch& b) {
        const StepLoss loss = model->forward_backward(b, seed, static_cast<uint64_t>(step_counter++), grad_scale, ws);
        ParamStore& store = model->param_store();
        optimizer->step(model->master(), model->grads(),
                        1.0f / (grad_scale * static_cast<float>(std::max<int64_t>(1, loss.target_tokens))), 1e-4,
                        store.working_dtype(), store.separate_working());
      };
      for (int s = 0; s < warmup; ++s) update(batches[s % batches.size()]);
      backend->synchronize();
      memory.sample();
      const auto begin = std::chrono::steady_clock::now();
      for (int s = 0; s < steps; ++s) {
        const data::Batch& b = batches[s % batches.size()];
        update(b);
        timed_tokens += b.tgt_tokens();
        timed_sentences += b.size;
      }
      backend->synchronize();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      memory.sample();
      const float grad_norm = optimizer->last_grad_norm();

      const double tokens_per_s = static_cast<double>(timed_tokens) / seconds;
      const double achieved = flops_per_token * tokens_per_s;
      fmt::print("{} sentences_per_step={:.1f} tgt_tokens_per_step={:.1f} pad_frac={:.3f} tgt_tok_s={:.0f} "
                 "ms_step={:.2f} gflop_tok={:.4f} tflops={:.1f} peak_tflops={:.0f} mfu={:.4f} peak_mem_mib={} "
                 "state_mib={} plan={} ws_mib={} ws_worst_mib={} ws_need_mib={} grad_norm={:.4g} status=ok\n",
                 prefix, static_cast<double>(timed_sentences) / steps, static_cast<double>(timed_tokens) / steps,
                 1.0 - static_cast<double>(real_tokens) / static_cast<double>(padded_tokens), tokens_per_s,
                 seconds * 1e3 / steps, flops_per_token / 1e9, achieved / 1e12, peak_flops / 1e12,
                 achieved / peak_flops, memory.valid() ? bench::mib(memory.peak_bytes()) : std::string("na"),
                 bench::mib(state_bytes), worst ? "worst" : "lstrain", bench::mib(ws.capacity()),
                 bench::mib(worst_plan), bench::mib(pool_need), grad_norm);
      std::fflush(stdout);
    } catch (const Error& e) {
      print_status(prefix, "failed", e.what());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return lseq::app_main(lseq::App::bench, argc, argv, run); }
