// load_step_model: a model directory's weights become the model's own step model, planned from the options.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/checkpoint/checkpoint.h"
#include "core/checkpoint/model_files.h"
#include "core/cli/model_loader.h"
#include "core/cli/options_test_util.h"
#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"
#include "kernels/cpu/cpu_backend.h"
#include "util/error.h"

namespace lseq {
namespace {

using testing::run_parse;
using testing::TempDir;

ModelConfig tiny_model() {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = 40;
  c.dim_emb = 16, c.heads = 2, c.dim_ffn = 32, c.enc_depth = c.dec_depth = 1, c.max_length = 20;
  c.validate();
  return c;
}

// A model directory holding `model`'s weights, and lstranslate's options over it (beam 3, 2 sentences a batch).
testing::ParseRun save_and_parse(const TempDir& dir, kernels::Backend& backend, EncoderDecoderModel& model) {
  std::vector<float> weights(model.num_params());
  backend.copy_to_host(weights.data(), model.master(), weights.size() * sizeof(float));
  save_weights(dir.path("model.safetensors"), model.param_store().table(), model.config(), weights, 0);
  return run_parse(App::translate, {"-m", dir.path(""), "--cpu", "--cpu-threads", "1", "--mini-batch", "2",
                                    "--beam-size", "3", "--max-length", "10"});
}

// A tiny model saved in a directory of its own (`name`), with lstranslate's options over it as save_and_parse makes
// them.
struct SavedTinyModel {
  SavedTinyModel(const std::string& name, uint64_t seed) : dir(name) {
    auto backend = kernels::make_cpu_backend(1);
    EncoderDecoderModel model(tiny_model(), *backend);
    model.init_params(seed);
    run = save_and_parse(dir, *backend, model);
  }
  ModelFiles files() const { return find_model_files(dir.path("")); }
  const Options& options() const { return run.parsed.options; }

  TempDir dir;
  testing::ParseRun run;
};

// The returned object is the EncoderDecoderStepModel itself, not a wrapper around it: a forwarding wrapper had
// missed step_topk, which sent beam search through the host fallback (whole log-softmax rows to the host at every
// step, the main reason lstranslate ran far slower than the decoding benchmark).
TEST(ModelLoader, ReturnsTheModelsOwnStepModelWithItsTopK) {
  TempDir dir("loader");
  auto backend = kernels::make_cpu_backend(1);
  const ModelConfig config = tiny_model();
  EncoderDecoderModel model(config, *backend);
  model.init_params(7);
  auto run = save_and_parse(dir, *backend, model);
  ASSERT_FALSE(run.parsed.exit_now) << run.err;
  std::unique_ptr<StepModel> loaded = load_step_model(find_model_files(dir.path("")), run.parsed.options);
  ASSERT_NE(dynamic_cast<EncoderDecoderStepModel*>(loaded.get()), nullptr);
  EXPECT_EQ(loaded->vocab_size(), config.tgt_vocab);

  // And it decodes like a step model built directly over the same weights.
  EncoderDecoderStepModel direct(model, 6, 11, 31, 2);
  const std::vector<int32_t> src = {5, 6, 7, 3, 8, 9, 3, 0}, lengths = {4, 3};
  std::vector<float> values_a, values_b, eos_a, eos_b;
  std::vector<int32_t> ids_a, ids_b;
  for (StepModel* m : {loaded.get(), static_cast<StepModel*>(&direct)}) m->start(src, lengths, 2, 4);
  loaded->step_topk({2, 2}, 3, values_a, ids_a, eos_a);
  direct.step_topk({2, 2}, 3, values_b, ids_b, eos_b);
  EXPECT_EQ(ids_a, ids_b);
  ASSERT_EQ(values_a.size(), values_b.size());
  for (std::size_t i = 0; i < values_a.size(); ++i) EXPECT_FLOAT_EQ(values_a[i], values_b[i]) << i;
}

// --decoders: copies loaded side by side, each its own object over one copy of the weights, all decoding alike; a
// load that fails is one error.
TEST(ModelLoader, LoadsSeveralCopiesThatDecodeAlike) {
  TempDir dir("loader-copies");
  auto backend = kernels::make_cpu_backend(1);
  const ModelConfig config = tiny_model();
  EncoderDecoderModel model(config, *backend);
  model.init_params(9);
  auto run = save_and_parse(dir, *backend, model);
  ASSERT_FALSE(run.parsed.exit_now) << run.err;
  const auto copies = load_step_models(find_model_files(dir.path("")), run.parsed.options, 3);
  ASSERT_EQ(copies.size(), 3u);
  EXPECT_NE(copies[0].get(), copies[1].get());
  const std::vector<int32_t> src = {5, 6, 7, 3, 8, 9, 3, 0}, lengths = {4, 3};
  std::vector<std::vector<float>> values(3);
  for (std::size_t i = 0; i < copies.size(); ++i) {
    std::vector<float> eos;
    std::vector<int32_t> ids;
    copies[i]->start(src, lengths, 2, 4);
    copies[i]->step_topk({2, 2}, 3, values[i], ids, eos);
  }
  EXPECT_EQ(values[1], values[0]);
  EXPECT_EQ(values[2], values[0]);
  // The copies share one copy of the weights, placed by the first copy's backend: it outlives any one of them. With
  // the first copy gone the others still decode alike (under the sanitizers, a read of freed weights fails here).
  auto later = load_step_models(find_model_files(dir.path("")), run.parsed.options, 3);
  later.erase(later.begin());
  for (auto& copy : later) {
    std::vector<float> got, eos;
    std::vector<int32_t> ids;
    copy->start(src, lengths, 2, 4);
    copy->step_topk({2, 2}, 3, got, ids, eos);
    EXPECT_EQ(got, values[0]);
  }

  // Weights that cannot be read: every load fails, and the caller gets one Error (no hang, no terminate).
  const ModelFiles files = find_model_files(dir.path(""));
  std::ofstream(dir.path("model.safetensors"), std::ios::trunc) << "not a safetensors file";
  EXPECT_THROW(load_step_models(files, run.parsed.options, 3), Error);
}

// Copy 0 (the decoder on the weights' own backend, and the only one lstranslate warms for a language model) loads on
// the calling thread and comes first, so that it is the decoder the first batch goes to; every copy loads once.
TEST(ModelLoader, CopyZeroLoadsOnTheCallingThreadAndComesFirst) {
  const SavedTinyModel saved("loader-copy-zero", 5);
  ASSERT_FALSE(saved.run.parsed.exit_now) << saved.run.err;
  const ModelFiles files = saved.files();
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mutex;
  std::vector<int> calls(4, 0);
  std::vector<const StepModel*> made(4, nullptr);
  bool copy_zero_on_caller = false;
  const auto models = load_copies(4, true, [&](int copy) {
    std::unique_ptr<StepModel> loaded = load_step_model(files, saved.options());
    std::lock_guard<std::mutex> lock(mutex);
    ++calls.at(static_cast<std::size_t>(copy));
    made.at(static_cast<std::size_t>(copy)) = loaded.get();
    if (copy == 0) copy_zero_on_caller = std::this_thread::get_id() == caller;
    return loaded;
  });
  ASSERT_EQ(models.size(), 4u);
  EXPECT_EQ(calls, std::vector<int>(4, 1));
  EXPECT_TRUE(copy_zero_on_caller);
  EXPECT_EQ(models[0].get(), made[0]);
}

// The default --decoders count may not fit a smaller GPU: copies that fail are left out while one loaded, unless the
// count was asked for; when none loads, the first error reaches the caller.
TEST(ModelLoader, CopiesThatFailAreLeftOutOnlyWhenAllowed) {
  const SavedTinyModel saved("loader-copies-fail", 4);
  ASSERT_FALSE(saved.run.parsed.exit_now) << saved.run.err;
  const ModelFiles files = saved.files();
  // Of four loads (on four threads), the second and third to start fail as a full GPU would.
  std::atomic<int> started{0};
  auto two_of_four_fail = [&](int) {
    const int n = ++started;
    if (n == 2 || n == 3) fail("cannot allocate 1024 bytes on the test's GPU (out of memory)");
    return load_step_model(files, saved.options());
  };
  EXPECT_EQ(load_copies(4, false, two_of_four_fail).size(), 2u);
  started = 0;
  try {
    load_copies(4, true, two_of_four_fail);
    ADD_FAILURE() << "a count that was asked for loaded in part";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_copies(3, false, [](int) -> std::unique_ptr<StepModel> { fail("no room at all"); }), Error);
  // The programs' loader: one copy by default on the CPU, --decoders copies when asked.
  EXPECT_EQ(load_decoders(files, saved.options()).size(), 1u);
}

}  // namespace
}  // namespace lseq
