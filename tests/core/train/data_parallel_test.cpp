// Data parallelism's pieces on the CPU stand-in for NCCL (ranks as threads over loopback TCP): the bucketed
// gradient exchange (all-reduce, reduce-scatter over shards, bf16 on the wire), the gradients placed in a
// communicator's window (NCCL's symmetric memory; a counting fake here) and the sharded optimizer (ZeRO-1),
// which must update exactly as the unsharded one does, keep 1/ranks of the state, write the same checkpoint state
// and resume it on another number of ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/dist/process_group.h"
#include "core/model/encoder_decoder_model.h"
#include "core/model/params.h"
#include "core/train/data_parallel.h"
#include "core/train/gradient_sync.h"
#include "core/train/optimizer.h"
#include "core/train/shard.h"
#include "kernels/backend.h"
#include "kernels/cpu/float_convert.h"
#include "../dist/dist_test_util.h"

namespace lseq {
namespace {

using dist::test::free_port;
using dist::test::rank_env;
using dist::test::run_ranks;
using dist::test::test_options;
using kernels::DType;

std::vector<float> rank_grads(int rank, std::size_t n) {
  std::mt19937_64 rng(100 + rank);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> g(n);
  for (float& x : g) x = normal(rng);
  return g;
}


struct Rank {
  dist::ProcessGroup group;
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend(1);
  kernels::Communicator* comm;
  Rank(int rank, int world, int port) : group(rank_env(rank, world, port), "cpu", test_options()),
                                        comm(group.connect(*backend)) {}
};

TEST(Shards, CoverTheBufferAlignedAndNearlyEqual) {
  for (int ranks : {1, 2, 3, 8}) {
    const auto o = shard_offsets(1000003, ranks);
    ASSERT_EQ(o.size(), static_cast<std::size_t>(ranks) + 1);
    EXPECT_EQ(o.front(), 0u);
    EXPECT_EQ(o.back(), 1000003u);
    for (int r = 0; r < ranks; ++r) {
      EXPECT_EQ(o[r] % kParamAlignment, 0u);
      EXPECT_LE(o[r + 1] - o[r], 1000003u / ranks + kParamAlignment);
    }
  }
  const auto tiny = shard_offsets(100, 3);  // 64-element steps: the last rank owns nothing
  EXPECT_EQ(tiny, (std::vector<std::size_t>{0, 64, 100, 100}));
}

// Backward's reports as a model makes them, from the top down, ending with 0.
const std::vector<std::size_t> kReports = {9000, 8100, 8000, 5000, 4900, 1200, 640, 0};

void check_sync(int world, bool sharded, DType wire) {
  SCOPED_TRACE(testing::Message() << world << " ranks, " << (sharded ? "sharded" : "all-reduce") << ", "
                                  << kernels::dtype_name(wire));
  const std::size_t n = 10000;
  const int port = free_port();
  const auto shards = shard_offsets(n, world);
  std::vector<std::vector<float>> results(static_cast<std::size_t>(world));
  std::vector<int> buckets(static_cast<std::size_t>(world));
  const auto errors = run_ranks(world, [&](int r) {
    Rank rank(r, world, port);
    GradientSyncOptions o;
    o.wire = wire;
    o.bucket_elements = 1000;
    if (sharded) o.shards = shards;
    GradientSync sync(*rank.backend, *rank.comm, n, o);
    for (int update = 0; update < 2; ++update) {  // a second update reuses the state
      std::vector<float> g = rank_grads(r, n);
      for (std::size_t first : kReports) sync.ready(g.data(), first);
      sync.finish(g.data());
      results[static_cast<std::size_t>(r)] = g;
      buckets[static_cast<std::size_t>(r)] = sync.buckets_last_update();
    }
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  std::vector<std::vector<float>> inputs;
  for (int q = 0; q < world; ++q) inputs.push_back(rank_grads(q, n));
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(buckets[static_cast<std::size_t>(r)], 10) << "1000-element buckets over 10000 gradients";
    const std::size_t begin = sharded ? shards[r] : 0, end = sharded ? shards[r + 1] : n;
    for (std::size_t i = begin; i < end; ++i) {
      // fp32: the sum in rank order; bf16: of the rounded values, in fp32, rounded once.
      auto wire_value = [&](int q) {
        const float x = inputs[static_cast<std::size_t>(q)][i];
        return wire == DType::bf16 ? kernels::bf16_to_float(kernels::float_to_bf16(x)) : x;
      };
      float want = wire_value(0);
      for (int q = 1; q < world; ++q) want += wire_value(q);
      if (wire == DType::bf16) want = kernels::bf16_to_float(kernels::float_to_bf16(want));
      ASSERT_EQ(results[static_cast<std::size_t>(r)][i], want) << "rank " << r << " element " << i;
    }
  }
}

TEST(GradientSync, AllReduceInBucketsGivesRankOrderSumsEverywhere) { check_sync(3, false, DType::f32); }
TEST(GradientSync, ReduceScatterGivesEachRankItsShardsSums) { check_sync(3, true, DType::f32); }
TEST(GradientSync, Bf16OnTheWire) {
  check_sync(2, false, DType::bf16);
  check_sync(3, true, DType::bf16);
}

// Rank 0 of `ranks` whose collectives do nothing: the fakes below override what they watch.
struct Silent : kernels::Communicator {
  int ranks;
  explicit Silent(int world) : ranks(world) {}
  int rank() const override { return 0; }
  int size() const override { return ranks; }
  std::string name() const override { return "silent"; }
  void all_reduce(DType, void*, std::size_t) override {}
  void reduce_scatter(DType, void*, const std::vector<std::size_t>&) override {}
  void all_gather(DType, void*, const std::vector<std::size_t>&) override {}
  void broadcast(DType, void*, std::size_t, int) override {}
  void wait() override {}
  void sum_host(std::vector<double>&) override {}
  double waited_seconds() override { return 0; }
  void abort(const std::string&) override {}
};

TEST(GradientSync, BucketsStartDuringBackwardAndTheRestGoesAlone) {
  // A communicator that counts what it was given, when, and whether as a collective nothing runs beside.
  struct Counting : Silent {
    struct Call {
      std::size_t begin, count;
      bool alone;
    };
    std::vector<Call> calls;
    const float* base = nullptr;
    Counting() : Silent(1) {}
    void record(const void* data, std::size_t count, bool alone) {
      calls.push_back({static_cast<std::size_t>(static_cast<const float*>(data) - base), count, alone});
    }
    void all_reduce(DType, void* data, std::size_t count) override { record(data, count, false); }
    void all_reduce_alone(DType, void* data, std::size_t count) override { record(data, count, true); }
    void reduce_scatter(DType, void* data, const std::vector<std::size_t>& r) override { scatter(data, r, false); }
    void reduce_scatter_alone(DType, void* data, const std::vector<std::size_t>& r) override {
      scatter(data, r, true);
    }
    void scatter(void* data, const std::vector<std::size_t>& ranges, bool alone) {
      record(static_cast<float*>(data) + ranges.front(), ranges.back() - ranges.front(), alone);
    }
  };
  for (bool sharded : {false, true}) {
    SCOPED_TRACE(sharded ? "reduce-scatter" : "all-reduce");
    Counting comm;
    auto backend = kernels::make_cpu_backend(1);
    std::vector<float> g(10400, 1.0f);
    comm.base = g.data();
    GradientSyncOptions o;
    o.bucket_elements = 1000;
    if (sharded) o.shards = {0, g.size()};
    GradientSync sync(*backend, comm, g.size(), o);
    sync.ready(g.data(), 9400);
    EXPECT_EQ(comm.calls.size(), 1u) << "the top 1000 are final: one bucket at once";
    sync.ready(g.data(), 8500);
    EXPECT_EQ(comm.calls.size(), 1u) << "900 more are not a whole bucket";
    sync.ready(g.data(), 5400);
    EXPECT_EQ(comm.calls.size(), 5u);
    sync.ready(g.data(), 0);
    EXPECT_EQ(comm.calls.size(), 11u) << "the end of backward issues the rest at once: 5 buckets and 400 elements";
    sync.finish(g.data());
    ASSERT_EQ(comm.calls.size(), 11u);
    std::size_t covered = 0;
    for (std::size_t i = 0; i < comm.calls.size(); ++i) {
      EXPECT_EQ(comm.calls[i].begin, i < 10 ? 9400 - 1000 * i : 0) << "from the top down";
      EXPECT_EQ(comm.calls[i].alone, i >= 5) << "bucket " << i << ": beside backward, or issued after its end";
      covered += comm.calls[i].count;
    }
    EXPECT_EQ(covered, g.size());
  }
}

// ---------------------------------------------------------------- the gradients in the communicator's window

// A communicator of two ranks whose collectives do nothing and whose windows come from the backend, counted.
struct Windowed : Silent {
  kernels::Backend& backend;
  std::vector<std::pair<void*, std::size_t>> windows;  // live ones
  int allocated = 0, released = 0;
  explicit Windowed(kernels::Backend& b) : Silent(2), backend(b) {}
  void* allocate_window(std::size_t bytes) override {
    ++allocated;
    windows.emplace_back(backend.allocate(bytes), bytes);
    return windows.back().first;
  }
  void release_window(void* w) override {
    ++released;
    for (std::size_t i = 0; i < windows.size(); ++i) {
      if (windows[i].first != w) continue;
      backend.release(w);
      windows.erase(windows.begin() + static_cast<long>(i));
      return;
    }
    ADD_FAILURE() << "release_window of memory that is not a window";
  }
};

ModelConfig tiny_config() {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = 50;
  c.dim_emb = 16;
  c.enc_depth = c.dec_depth = 1;
  c.heads = 2;
  c.dim_ffn = 32;
  c.max_length = 20;
  return c;
}

TEST(DataParallelWindow, TheStoresGradientsLiveInTheWindowWhileItLasts) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(tiny_config(), *backend);
  ASSERT_FALSE(model.gradients_in_step_memory());
  const std::size_t n = model.num_params();
  backend->fill(DType::f32, model.grads(), n, 3.0f);  // what a zeroed window must not show
  Windowed comm(*backend);
  GradientSyncOptions sync;
  sync.wire = DType::bf16;  // the 16-bit copy is a window too
  {
    DataParallel parallel(model, &comm, sync);
    ASSERT_EQ(comm.allocated, 2);
    ASSERT_EQ(comm.windows.size(), 2u);
    const auto grads = std::find_if(comm.windows.begin(), comm.windows.end(),
                                    [&](const auto& w) { return w.second == n * sizeof(float); });
    ASSERT_NE(grads, comm.windows.end()) << "a window of the gradients' size";
    EXPECT_EQ(model.grads(), grads->first) << "the store's gradients are in the window";
    EXPECT_FALSE(model.gradients_in_step_memory());
    std::vector<float> host(n, 1.0f);
    backend->copy_to_host(host.data(), model.grads(), n * sizeof(float));
    EXPECT_EQ(std::count(host.begin(), host.end(), 0.0f), static_cast<long>(n)) << "placed zeroed";
    model.zero_grads();  // writes the window (a sanitizer sees a wrong size here)
  }
  EXPECT_EQ(comm.released, 2);
  EXPECT_TRUE(comm.windows.empty());
  ASSERT_NE(model.grads(), nullptr) << "a buffer of its own again";
  EXPECT_FALSE(model.gradients_in_step_memory());
  model.zero_grads();
}

TEST(DataParallelWindow, GradientsInStepMemoryTakeNoWindow) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(tiny_config(), *backend);
  model.set_gradients_in_step_memory(true);
  Windowed comm(*backend);
  {
    DataParallel parallel(model, &comm, GradientSyncOptions{});
    EXPECT_EQ(comm.allocated, 0) << "fp32 on the wire and the gradients in the step's memory: nothing to place";
  }
  EXPECT_EQ(comm.released, 0);
}

// ---------------------------------------------------------------- the sharded optimizer

struct Trajectory {
  std::vector<float> params, m, v, smoothed;
  std::vector<float> norms;
};

std::vector<float> step_grads(int step, std::size_t n) {
  std::mt19937_64 rng(7 + step);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> g(n);
  for (float& x : g) x = normal(rng);
  return g;
}

OptimizerOptions trajectory_options(float clip) {
  OptimizerOptions o;
  o.clip_norm = clip;
  o.weight_decay = 0.01f;
  o.smoothing = 0.1f;
  return o;
}

// `steps` Adam updates of fp32 parameters from `start` with the same gradients on every rank, unsharded on one
// backend.
Trajectory unsharded(const std::vector<float>& start, int steps, float clip) {
  auto backend = kernels::make_cpu_backend(1);
  const std::size_t n = start.size();
  Optimizer opt(*backend, n, trajectory_options(clip));
  auto* p = static_cast<float*>(backend->allocate(n * 4));
  auto* g = static_cast<float*>(backend->allocate(n * 4));
  backend->copy_to_device(p, start.data(), n * 4);
  opt.start_smoothing_from(p);
  Trajectory t;
  for (int s = 0; s < steps; ++s) {
    const auto grads = step_grads(s, n);
    backend->copy_to_device(g, grads.data(), n * 4);
    opt.step(p, g, 0.25f, 1e-2);
    t.norms.push_back(opt.last_grad_norm());
  }
  opt.weights_to_host(p, false, t.params);
  opt.export_state(t.m, t.v, t.smoothed);
  backend->release(p);
  backend->release(g);
  return t;
}

// The same sharded over `world` ranks; each rank reports what it holds.
std::vector<Trajectory> sharded(const std::vector<float>& start, int steps, float clip, int world,
                                std::vector<std::size_t>* state_bytes = nullptr) {
  const std::size_t n = start.size();
  const int port = free_port();
  std::vector<Trajectory> out(static_cast<std::size_t>(world));
  if (state_bytes) state_bytes->assign(static_cast<std::size_t>(world), 0);
  const auto errors = run_ranks(world, [&](int r) {
    Rank rank(r, world, port);
    OptimizerShard shard;
    shard.comm = rank.comm;
    shard.offsets = shard_offsets(n, world);
    Optimizer opt(*rank.backend, n, trajectory_options(clip), shard);
    if (state_bytes) (*state_bytes)[static_cast<std::size_t>(r)] = opt.state_bytes();
    std::vector<float> p = start;
    opt.start_smoothing_from(p.data());
    Trajectory& t = out[static_cast<std::size_t>(r)];
    for (int s = 0; s < steps; ++s) {
      std::vector<float> g = step_grads(s, n);
      if (s % 2 == 1) opt.start_norm(g.data());  // as the trainer does; step starts it itself otherwise
      opt.step(p.data(), g.data(), 0.25f, 1e-2);
      t.norms.push_back(opt.last_grad_norm());
    }
    t.params = p;  // fp32: the all-gather keeps the whole master on every rank
    opt.export_state(t.m, t.v, t.smoothed);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  return out;
}

std::vector<float> start_params(std::size_t n) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::vector<float> p(n);
  for (float& x : p) x = u(rng);
  return p;
}

TEST(ShardedOptimizer, WithoutClippingItUpdatesBitForBitAsTheUnshardedOne) {
  const auto start = start_params(1000);  // 16 blocks of 64: uneven shards over 3 ranks
  const Trajectory want = unsharded(start, 6, 0.0f);
  for (int world : {2, 3}) {
    std::vector<std::size_t> bytes;
    const auto got = sharded(start, 6, 0.0f, world, &bytes);
    for (int r = 0; r < world; ++r) {
      const Trajectory& t = got[static_cast<std::size_t>(r)];
      EXPECT_EQ(t.params, want.params) << world << " ranks, rank " << r;
      EXPECT_EQ(t.m, want.m);
      EXPECT_EQ(t.v, want.v);
      EXPECT_EQ(t.smoothed, want.smoothed);
      ASSERT_EQ(t.norms.size(), want.norms.size());
      for (std::size_t s = 0; s < want.norms.size(); ++s) EXPECT_NEAR(t.norms[s], want.norms[s], 1e-5 * want.norms[s]);
      const std::size_t owned = shard_offsets(1000, world)[r + 1] - shard_offsets(1000, world)[r];
      EXPECT_EQ(bytes[static_cast<std::size_t>(r)], 4 * owned * sizeof(float)) << "m, v, smoothed and its temporary";
    }
  }
}

TEST(ShardedOptimizer, WithClippingTheGlobalNormClipsAllShardsAlike) {
  const auto start = start_params(1000);
  const Trajectory want = unsharded(start, 6, 5.0f);  // norms ~ 0.25 * 3 * sqrt(1000) = 24: clipped
  ASSERT_GT(want.norms[0], 5.0f);
  const auto got = sharded(start, 6, 5.0f, 2);
  for (const Trajectory& t : got) {
    ASSERT_EQ(t.params.size(), want.params.size());
    for (std::size_t i = 0; i < want.params.size(); ++i) {
      ASSERT_NEAR(t.params[i], want.params[i], 1e-6f) << i;  // the norm's last bits may differ, not the update
    }
    EXPECT_EQ(t.params, got[0].params) << "every rank holds the same weights";
  }
}

TEST(ShardedOptimizer, StateSavedByTwoRanksResumesOnThree) {
  const std::size_t n = 1000;
  const auto start = start_params(n);
  const Trajectory straight = unsharded(start, 8, 0.0f);
  const Trajectory first = sharded(start, 4, 0.0f, 2)[0];
  // Three ranks import the gathered state and run steps 4..7.
  const int port = free_port();
  std::vector<std::vector<float>> params(3);
  const auto errors = run_ranks(3, [&](int r) {
    Rank rank(r, 3, port);
    OptimizerShard shard;
    shard.comm = rank.comm;
    shard.offsets = shard_offsets(n, 3);
    Optimizer opt(*rank.backend, n, trajectory_options(0.0f), shard);
    opt.import_state(first.m, first.v, first.smoothed, 4);
    std::vector<float> p = first.params;
    for (int s = 4; s < 8; ++s) {
      std::vector<float> g = step_grads(s, n);
      opt.step(p.data(), g.data(), 0.25f, 1e-2);
    }
    params[static_cast<std::size_t>(r)] = p;
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  for (const auto& p : params) EXPECT_EQ(p, straight.params);
}

TEST(ShardedOptimizer, SixteenBitTrainingKeepsOnlyAShardOfTheMaster) {
  const std::size_t n = 700;
  const auto start = start_params(n);
  // Reference: an unsharded bf16 store (master + working copy), no clipping.
  auto ref_backend = kernels::make_cpu_backend(1);
  ParamTable table;
  table.add("w", {static_cast<int64_t>(n)}, ParamInit::zeros);
  ParamStore ref(table, *ref_backend, DType::bf16);
  ref.upload(start);
  Optimizer ref_opt(*ref_backend, n, trajectory_options(0.0f));
  ref_opt.start_smoothing_from(ref.master());
  for (int s = 0; s < 3; ++s) {
    const auto g = step_grads(s, n);
    ref_backend->copy_to_device(ref.grads(), g.data(), n * 4);
    ref_opt.step(ref.master(), ref.grads(), 0.25f, 1e-2, DType::bf16, ref.separate_working());
  }
  std::vector<float> want_master(n);
  std::vector<uint16_t> want_working(n);
  ref_backend->copy_to_host(want_master.data(), ref.master(), n * 4);
  ref_backend->copy_to_host(want_working.data(), ref.working(), n * 2);

  const int port = free_port();
  std::vector<std::vector<float>> masters(2);
  std::vector<std::vector<uint16_t>> workings(2);
  const auto errors = run_ranks(2, [&](int r) {
    Rank rank(r, 2, port);
    ParamStore store(table, *rank.backend, DType::bf16);
    store.release_master();
    EXPECT_EQ(store.master(), nullptr);
    store.upload(start);  // the working copy
    OptimizerShard shard;
    shard.comm = rank.comm;
    shard.offsets = shard_offsets(n, 2);
    shard.own_master = true;
    Optimizer opt(*rank.backend, n, trajectory_options(0.0f), shard);
    opt.load_master(start);
    opt.start_smoothing_from(nullptr);
    for (int s = 0; s < 3; ++s) {
      const auto g = step_grads(s, n);
      rank.backend->copy_to_device(store.grads(), g.data(), n * 4);
      opt.step(nullptr, store.grads(), 0.25f, 1e-2, DType::bf16, store.separate_working());
    }
    opt.weights_to_host(nullptr, false, masters[static_cast<std::size_t>(r)]);
    workings[static_cast<std::size_t>(r)].resize(n);
    rank.backend->copy_to_host(workings[static_cast<std::size_t>(r)].data(), store.working(), n * 2);
    // Validation's swap to the smoothed weights and back leaves the working copy as it was.
    opt.swap_smoothed(nullptr, DType::bf16, store.separate_working());
    opt.swap_smoothed(nullptr, DType::bf16, store.separate_working());
    std::vector<uint16_t> after(n);
    rank.backend->copy_to_host(after.data(), store.working(), n * 2);
    EXPECT_EQ(after, workings[static_cast<std::size_t>(r)]);
    EXPECT_EQ(opt.state_bytes(), 5 * opt.shard_size() * sizeof(float)) << "m, v, smoothed, its temporary, master";
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(masters[static_cast<std::size_t>(r)], want_master) << "rank " << r;
    EXPECT_EQ(workings[static_cast<std::size_t>(r)], want_working) << "rank " << r;
  }
}

}  // namespace
}  // namespace lseq
