// Training throughput of a Transformer preset (issue 5's benchmark): target tokens/s, ms per step, model FLOPs
// utilisation and device memory, for batches of given target-token budgets drawn from a WMT-like length
// distribution (wmt_batches.h). Each case: `--pool` distinct batches, `--warmup` untimed steps, then `--steps`
// timed steps of the whole update (forward_backward with gradients in step memory, as lstrain has for updates of
// one batch, or over several GPUs in the exchange's window, then Optimizer::step), cycling the pool from its first
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
// --devices 0 1 runs one process per device (data parallelism, bench_ranks.h) with lstrain's update: each rank takes
// its own batch of the pool (rank r the r-th of each round; --rank-batches), the gradients are exchanged in buckets
// during backward (--sync-precision, --sync-bucket-mib), the token counts summed, and with --sharding the optimizer
// state sharded. tokens is then per device, tgt_tok_s the whole job's, peak_mem_mib the largest device's, comm_frac the
// share of the step a device stood waiting for communication; a RESULT bench=allreduce line times the all-reduce
// of the whole gradient alone (for predictions at more devices).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench_ranks.h"
#include "bench_support.h"
#include "core/cli/app_main.h"
#include "core/model/encoder_decoder_model.h"
#include "core/train/data_parallel.h"
#include "core/train/optimizer.h"
#include "core/train/shard.h"
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

// --timeline: the host clock at each point where a timed step synchronises with its device (steady_clock, which is
// one clock for every process of a machine, so the ranks' files line up). The loss read marks the end of this
// rank's backward; the totals come back after the gradients' exchange and the small exchange of the totals.
struct StepTimeline {
  struct Step {
    int batch = 0;
    int64_t target_tokens = 0;
    double start = 0, backward_done = 0, totals_known = 0, optimizer_issued = 0;
  };
  std::vector<Step> steps;

  static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }
  void write(const std::string& path, int rank, int ranks) const {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) fail("cannot write the step timeline to {} (--timeline); check the directory", path);
    std::fprintf(f, "rank,ranks,step,batch,target_tokens,start,backward_done,totals_known,optimizer_issued\n");
    for (std::size_t s = 0; s < steps.size(); ++s) {
      const Step& t = steps[s];
      std::fprintf(f, "%d,%d,%zu,%d,%lld,%.7f,%.7f,%.7f,%.7f\n", rank, ranks, s, t.batch,
                   static_cast<long long>(t.target_tokens), t.start, t.backward_done, t.totals_known,
                   t.optimizer_issued);
    }
    if (std::fclose(f) != 0) fail("cannot write the step timeline to {} (--timeline): disk full?", path);
  }
};

void print_status(const std::string& prefix, const char* status, const std::string& reason) {
  fmt::print("{} status={} reason={}\n", prefix, status, bench::one_word(reason));
  std::fflush(stdout);
}

// The all-reduce of the whole gradient alone (no backward to hide behind), the median of 5 after 2 untimed: what
// predictions for more devices start from. busbw_gbs is NCCL's bus bandwidth (2 (n - 1) / n x bytes / time).
void time_all_reduce(kernels::Backend& backend, kernels::Communicator& comm, std::size_t count, kernels::DType dt,
                     const std::string& model) {
  const std::size_t bytes = count * kernels::dtype_size(dt);
  void* buffer = backend.allocate(bytes);
  backend.fill(dt, buffer, count, 1.0f);
  std::vector<double> ms;
  for (int i = 0; i < 7; ++i) {
    std::vector<double> line_up = {0.0};
    comm.sum_host(line_up);  // every rank starts together
    backend.synchronize();
    const auto begin = std::chrono::steady_clock::now();
    comm.all_reduce_alone(dt, buffer, count);
    comm.wait();
    backend.synchronize();
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    if (i >= 2) ms.push_back(t);
  }
  backend.release(buffer);
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];
  const int n = comm.size();
  if (comm.rank() == 0) {
    fmt::print("RESULT bench=allreduce impl={} model={} ranks={} dtype={} bytes={} ms={:.3f} busbw_gbs={:.1f} "
               "status=ok\n",
               comm.name().substr(0, comm.name().find(' ')), model, n, kernels::dtype_name(dt), bytes, median,
               2.0 * (n - 1) / n * static_cast<double>(bytes) / (median / 1e3) / 1e9);
    std::fflush(stdout);
  }
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
  const std::string timeline_path = options.get_string("timeline");
  if (budgets.empty()) fail("--tokens needs at least one budget");
  bench::Ranks ranks = bench::join_ranks(options);
  if (ranks.launcher && !plan_only && !options.get_bool("dump-only")) return bench::launch_ranks(options);
  const std::string sharding = options.get_string("sharding");
  const bool sharded = ranks.size > 1 && sharding != "none";
  GradientSyncOptions sync;
  sync.wire = options.get_string("sync-precision") == "bf16" ? kernels::DType::bf16 : kernels::DType::f32;
  sync.bucket_elements = static_cast<std::size_t>(options.get_int("sync-bucket-mib")) << 18;

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
    return fmt::format("RESULT bench=train impl={} model={} precision={} tokens={} pool={} warmup={} steps={} "
                       "ranks={} sharding={} sync={}",
                       recompute_ffn ? "lseq-recompute-ffn" : "lseq", preset.name, precision, budget, pool, warmup,
                       steps, ranks.size, sharded ? sharding : "none", options.get_string("sync-precision"));
  };
  // Only rank 0 prints (the others' numbers reach it through the communicator).
  auto print_status_once = [&](const std::string& prefix, const char* status, const std::string& reason) {
    if (ranks.printer()) print_status(prefix, status, reason);
  };
  // Before the backend: its baseline excludes nothing of ours.
  bench::DeviceMemoryProbe memory(!cpu, ranks.device >= 0 ? ranks.device : bench::device(options));
  std::unique_ptr<kernels::Backend> backend;
  kernels::DType dt = kernels::DType::f32;
  try {
    // A plan needs only the dtype's sizes: bf16/fp16 plans are made over the CPU backend too (which stores
    // 16-bit tensors, but computes only in fp32).
    const bool plan_only_on_cpu = plan_only && cpu;
    backend = bench::make_backend(preset.options, options, plan_only_on_cpu ? "fp32" : precision, ranks.device);
    preset.options.set("precision", YAML::Node(precision));
    dt = precision_dtype(preset.options);
    if (ranks.group) ranks.comm = ranks.group->connect(*backend);
  } catch (const Error& e) {
    for (int64_t budget : budgets) print_status_once(prefix_of(budget), "not-measured", e.what());
    return ranks.size > 1 ? 1 : 0;
  }
  if (ranks.printer()) {
    fmt::print("# backend {}; preset {}: dim {}, {}+{} layers, {} heads, ffn {}, vocab {}/{}, tied {}{}\n",
               backend->name(), preset_path, config.dim_emb, config.enc_depth, config.dec_depth, config.heads,
               config.dim_ffn, config.src_vocab, config.tgt_vocab, tied_name(config.tied),
               ranks.comm ? fmt::format("; {} ranks over {}", ranks.size, ranks.comm->name()) : "");
  }

  std::unique_ptr<EncoderDecoderModel> model;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<DataParallel> parallel;
  try {
    model = std::make_unique<EncoderDecoderModel>(config, *backend, dt);
    OptimizerShard shard;
    if (sharded) {
      shard.comm = ranks.comm;
      shard.offsets = shard_offsets(model->num_params(), ranks.size);
      shard.own_master = dt != kernels::DType::f32;
      if (shard.own_master) model->param_store().release_master();
      sync.shards = shard.offsets;
    }
    const std::vector<float> initial = model->initial_params(1);
    model->load_params(initial);
    model->set_recompute_ffn(recompute_ffn);
    // As lstrain does for updates of one batch: in step memory, except over several GPUs (the exchange's window).
    model->set_gradients_in_step_memory(ranks.size == 1 || cpu);
    optimizer = std::make_unique<Optimizer>(*backend, model->num_params(), preset_optimizer(preset.options), shard);
    optimizer->load_master(initial);
    parallel = std::make_unique<DataParallel>(*model, ranks.comm, sync);
  } catch (const Error& e) {
    for (int64_t budget : budgets) print_status_once(prefix_of(budget), "not-measured", e.what());
    return ranks.size > 1 ? 1 : 0;
  }
  memory.sample();
  // Parameters (fp32 master, the bf16/fp16 working copy), Adam's two moments and the gradients that live between
  // steps (with gradients in step memory: the embedding tables' side buffer; the rest is in the workspace plan):
  // counted, and as the driver saw it (the latter also holds the backend's scratch, cuBLAS and allocation
  // rounding).
  const std::size_t separate_working = model->param_store().separate_working() ? kernels::dtype_size(dt) : 0;
  const std::size_t persistent_grads =
      model->gradients_in_step_memory() ? model->param_store().side_end() : model->num_params();
  // Sharded: the optimizer's own count (moments, and in 16 bits the master shard) replaces the full master and
  // moments.
  const std::size_t master_bytes = optimizer->owns_master() ? 0 : model->num_params() * 4;
  const std::size_t optimizer_bytes = sharded ? optimizer->state_bytes() : model->num_params() * 8;
  const std::size_t wire_bytes = ranks.size > 1 && sync.wire != kernels::DType::f32 ? model->num_params() * 2 : 0;
  const std::size_t state_bytes = master_bytes + optimizer_bytes + model->num_params() * separate_working +
                                  persistent_grads * 4 + wire_bytes;
  const double flops_per_token = bench::train_flops_per_token(model->params(), config);
  if (ranks.printer()) {
    fmt::print("# {} weights ({} in the flat buffers); {:.4f} GFLOP per target token (6 x {} weights a token "
               "passes through); model and optimizer state {} MiB counted, {} MiB on the device with the backend's "
               "own\n",
               model->num_weights(), model->num_params(), flops_per_token / 1e9, flops_per_token / 6,
               bench::mib(state_bytes), memory.valid() ? bench::mib(memory.peak_bytes()) : std::string("na"));
  }
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
        if (!ranks.printer()) continue;
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
      StepTimeline timeline;
      // lstrain's update (Trainer::update with one batch): over several ranks the gradient exchange starts in
      // backward, and the tokens of all ranks scale the gradients.
      auto update = [&](const data::Batch& b) {
        StepTimeline::Step marks;
        marks.start = StepTimeline::now();
        model->zero_grads();  // as Trainer::update (nothing to do with gradients in step memory)
        parallel->arm();
        const StepLoss loss = model->forward_backward(b, seed, static_cast<uint64_t>(step_counter++), grad_scale, ws);
        marks.backward_done = StepTimeline::now();  // the loss is read back: this rank's backward has finished
        DataParallel::Totals totals;
        totals.loss_sum = loss.loss_sum;
        totals.target_tokens = static_cast<double>(loss.target_tokens);
        if (parallel->active()) {
          parallel->finish();
          optimizer->start_norm(model->grads());
          totals = parallel->sum(totals);
        }
        marks.totals_known = StepTimeline::now();  // over ranks: after the gradients' exchange and the totals'
        ParamStore& store = model->param_store();
        optimizer->step(model->master(), model->grads(),
                        1.0f / (grad_scale * static_cast<float>(std::max(1.0, totals.target_tokens))), 1e-4,
                        store.working_dtype(), store.separate_working());
        marks.optimizer_issued = StepTimeline::now();
        marks.target_tokens = b.tgt_tokens();
        return marks;
      };
      // Rank r's s-th batch: the r-th of round s over the pool, in length order (--rank-batches by-length: a round's
      // batches are neighbours in length, as lstrain's rounds take neighbouring batches of a sorted window, so the
      // ranks' steps take about the same time) or in the pool's shuffled order.
      std::vector<std::size_t> pool_order(batches.size());
      for (std::size_t i = 0; i < pool_order.size(); ++i) pool_order[i] = i;
      if (options.get_string("rank-batches") == "by-length") {
        std::stable_sort(pool_order.begin(), pool_order.end(), [&](std::size_t a, std::size_t b) {
          const data::Batch &x = batches[a], &y = batches[b];
          return x.tgt_len != y.tgt_len ? x.tgt_len < y.tgt_len : x.src_len < y.src_len;
        });
      }
      auto batch_index = [&](int s) {
        return pool_order[static_cast<std::size_t>(s * ranks.size + ranks.rank) % batches.size()];
      };
      auto batch_of = [&](int s) -> const data::Batch& { return batches[batch_index(s)]; };
      for (int s = 0; s < warmup; ++s) update(batch_of(s));
      backend->synchronize();
      memory.sample();
      const double waited_before = parallel->comm_wait_seconds();
      const auto begin = std::chrono::steady_clock::now();
      for (int s = 0; s < steps; ++s) {
        const data::Batch& b = batch_of(s);
        StepTimeline::Step marks = update(b);
        marks.batch = static_cast<int>(batch_index(s));
        timeline.steps.push_back(marks);
        timed_tokens += b.tgt_tokens();
        timed_sentences += b.size;
      }
      backend->synchronize();
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
      if (!timeline_path.empty()) {  // after the clock stopped: the file is not part of the timed steps
        timeline.write(fmt::format("{}.{}.rank{}.csv", timeline_path, budgets[c], ranks.rank), ranks.rank, ranks.size);
      }
      const double waited = parallel->comm_wait_seconds() - waited_before;
      memory.sample();
      const float grad_norm = optimizer->last_grad_norm();
      // The job: every rank's tokens over the slowest rank's time; the largest device's memory.
      const std::vector<double> all_tokens = bench::all_values(ranks.comm, static_cast<double>(timed_tokens));
      const std::vector<double> all_seconds = bench::all_values(ranks.comm, seconds);
      const std::vector<double> all_waited = bench::all_values(ranks.comm, waited);
      const std::vector<double> all_memory =
          bench::all_values(ranks.comm, memory.valid() ? static_cast<double>(memory.peak_bytes()) : -1.0);
      if (!ranks.printer()) continue;
      double job_tokens = 0, job_seconds = 0, job_waited = 0, job_memory = -1;
      for (std::size_t r = 0; r < all_tokens.size(); ++r) {
        job_tokens += all_tokens[r];
        job_seconds = std::max(job_seconds, all_seconds[r]);
        job_waited += all_waited[r] / static_cast<double>(all_tokens.size());
        job_memory = std::max(job_memory, all_memory[r]);
      }
      const double tokens_per_s = job_tokens / job_seconds;
      const double achieved = flops_per_token * tokens_per_s;
      // Per step: rank 0's sentences and tokens (one device's batch); mfu: per device (the job's FLOPs over ranks x
      // one device's peak).
      fmt::print("{} sentences_per_step={:.1f} tgt_tokens_per_step={:.1f} pad_frac={:.3f} tgt_tok_s={:.0f} "
                 "ms_step={:.2f} comm_frac={:.4f} gflop_tok={:.4f} tflops={:.1f} peak_tflops={:.0f} mfu={:.4f} "
                 "peak_mem_mib={} state_mib={} plan={} ws_mib={} ws_worst_mib={} ws_need_mib={} grad_norm={:.4g} "
                 "status=ok\n",
                 prefix, static_cast<double>(timed_sentences) / steps, static_cast<double>(timed_tokens) / steps,
                 1.0 - static_cast<double>(real_tokens) / static_cast<double>(padded_tokens), tokens_per_s,
                 job_seconds * 1e3 / steps, job_waited / job_seconds, flops_per_token / 1e9, achieved / 1e12,
                 peak_flops / 1e12, achieved / peak_flops / ranks.size,
                 job_memory >= 0 ? bench::mib(static_cast<std::size_t>(job_memory)) : std::string("na"),
                 bench::mib(state_bytes), worst ? "worst" : "lstrain", bench::mib(ws.capacity()),
                 bench::mib(worst_plan), bench::mib(pool_need), grad_norm);
      std::fflush(stdout);
    } catch (const Error& e) {
      print_status_once(prefix, "failed", e.what());
      if (ranks.size > 1) throw;  // the other ranks cannot go on without this one
    }
  }
  if (ranks.comm && !plan_only) time_all_reduce(*backend, *ranks.comm, model->num_params(), sync.wire, preset.name);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return lseq::app_main(lseq::App::bench, argc, argv, run); }
