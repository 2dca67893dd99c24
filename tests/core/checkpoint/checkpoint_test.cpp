// The model directory's checkpoints: round trip, the atomic commit point, and the errors for damaged or foreign
// checkpoints and weights (non-finite values, tensors that do not match the config, a damaged `latest`).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "core/checkpoint/checkpoint.h"
#include "core/model/encoder_decoder_model.h"
#include "kernels/backend.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lseq {
namespace {

// The message of the lseq::Error that f throws, or "" when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

ModelConfig small_config() {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = 17;
  c.dim_emb = 8;
  c.heads = 2;
  c.dim_ffn = 16;
  c.enc_depth = c.dec_depth = 1;
  c.max_length = 10;
  return c;
}

std::vector<float> random_values(std::size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

// Values only where the table has tensors: the alignment gaps of the flat buffer stay zero, as in a real run.
std::vector<float> random_params(const ParamTable& table, uint64_t seed) {
  const std::vector<float> values = random_values(table.size(), seed);
  std::vector<float> flat(table.size(), 0.0f);
  for (const ParamInfo& p : table.list()) {
    std::copy(values.begin() + p.offset, values.begin() + p.offset + p.count, flat.begin() + p.offset);
  }
  return flat;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("lseq-ckpt-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    backend_ = kernels::make_cpu_backend(1);
    model_ = std::make_unique<EncoderDecoderModel>(small_config(), *backend_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CheckpointTensors random_state(uint64_t seed) const {
    const std::size_t n = model_->num_params();
    CheckpointTensors t;
    t.params = random_params(table(), seed);
    t.adam_m = random_values(n, seed + 1);
    t.adam_v = random_values(n, seed + 2);
    return t;
  }
  TrainingProgress progress(int64_t updates) const {
    TrainingProgress p;
    p.updates = updates;
    p.batches = updates * 2;
    p.optimizer_steps = updates;
    p.target_tokens = updates * 100;
    p.batcher_epoch = 3;
    p.batcher_batch = 7;
    p.best["perplexity"] = 12.5;
    p.last["perplexity"] = 13.25;
    p.stalled = 1;
    return p;
  }
  const ParamTable& table() const { return model_->param_store().table(); }

  fs::path dir_;
  std::unique_ptr<kernels::Backend> backend_;
  std::unique_ptr<EncoderDecoderModel> model_;
};

TEST_F(CheckpointTest, SaveThenLoadGivesTheSameStateAndProgress) {
  ModelDir dir(dir_.string());
  dir.create();
  EXPECT_FALSE(dir.has_checkpoint());
  const CheckpointTensors saved = random_state(1);
  dir.save_checkpoint(table(), model_->config(), saved, progress(20));
  ASSERT_TRUE(dir.has_checkpoint());

  CheckpointTensors loaded;
  TrainingProgress p;
  dir.load_checkpoint(table(), model_->config(), loaded, p);
  EXPECT_EQ(loaded.params, saved.params);
  EXPECT_EQ(loaded.adam_m, saved.adam_m);
  EXPECT_EQ(loaded.adam_v, saved.adam_v);
  EXPECT_TRUE(loaded.smoothed.empty());
  EXPECT_EQ(p.updates, 20);
  EXPECT_EQ(p.batches, 40);
  EXPECT_EQ(p.batcher_epoch, 3);
  EXPECT_EQ(p.batcher_batch, 7);
  EXPECT_EQ(p.best.at("perplexity"), 12.5);
  EXPECT_EQ(p.stalled, 1);

  // model.safetensors holds the weights and the model config.
  std::vector<float> weights;
  load_weights(dir.file("model.safetensors"), table(), weights);
  EXPECT_EQ(weights, saved.params);
  EXPECT_EQ(read_model_config(dir.file("model.safetensors")).dim_emb, 8);
}

TEST_F(CheckpointTest, InferenceWeightsAreTheSmoothedOnesWhenSmoothing) {
  ModelDir dir(dir_.string());
  dir.create();
  CheckpointTensors saved = random_state(2);
  saved.smoothed = random_params(table(), 9);
  dir.save_checkpoint(table(), model_->config(), saved, progress(5));
  std::vector<float> weights;
  load_weights(dir.file("model.safetensors"), table(), weights);
  EXPECT_EQ(weights, saved.smoothed);
  CheckpointTensors loaded;
  TrainingProgress p;
  dir.load_checkpoint(table(), model_->config(), loaded, p);
  EXPECT_EQ(loaded.params, saved.params);
  EXPECT_EQ(loaded.smoothed, saved.smoothed);
}

TEST_F(CheckpointTest, OnlyTheLatestCompleteCheckpointCountsAndOldOnesGo) {
  ModelDir dir(dir_.string());
  dir.create();
  dir.save_checkpoint(table(), model_->config(), random_state(3), progress(10));
  const std::string first = dir.latest_checkpoint();
  // A crash in the middle of the next save leaves a partial directory: it is ignored.
  fs::create_directories(dir_ / "checkpoint" / "u000000020.partial");
  std::ofstream(dir_ / "checkpoint" / "u000000020.partial" / "model.safetensors") << "half a file";
  EXPECT_EQ(dir.latest_checkpoint(), first);
  CheckpointTensors loaded;
  TrainingProgress p;
  dir.load_checkpoint(table(), model_->config(), loaded, p);
  EXPECT_EQ(p.updates, 10);

  // The next complete save replaces it and removes the old and the partial directories.
  const CheckpointTensors newer = random_state(4);
  dir.save_checkpoint(table(), model_->config(), newer, progress(30));
  EXPECT_NE(dir.latest_checkpoint(), first);
  EXPECT_FALSE(fs::exists(first));
  EXPECT_FALSE(fs::exists(dir_ / "checkpoint" / "u000000020.partial"));
  dir.load_checkpoint(table(), model_->config(), loaded, p);
  EXPECT_EQ(p.updates, 30);
  EXPECT_EQ(loaded.params, newer.params);
}

TEST_F(CheckpointTest, DamagedCheckpointsGiveClearErrors) {
  ModelDir dir(dir_.string());
  dir.create();
  dir.save_checkpoint(table(), model_->config(), random_state(5), progress(10));
  CheckpointTensors loaded;
  TrainingProgress p;

  // Truncated optimizer state.
  const fs::path state = fs::path(dir.latest_checkpoint()) / "optimizer.safetensors";
  fs::resize_file(state, fs::file_size(state) / 2);
  try {
    dir.load_checkpoint(table(), model_->config(), loaded, p);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt or truncated"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("optimizer.safetensors"), std::string::npos) << e.what();
  }

  // A pointer to a checkpoint that is not there.
  std::ofstream(dir_ / "checkpoint" / "latest") << "u000000099\n";
  try {
    dir.latest_checkpoint();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("u000000099"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, ACheckpointOfAnotherModelIsRejectedNamingTheOption) {
  ModelDir dir(dir_.string());
  dir.create();
  dir.save_checkpoint(table(), model_->config(), random_state(6), progress(10));
  ModelConfig other = small_config();
  other.dim_ffn = 32;
  EncoderDecoderModel other_model(other, *backend_);
  CheckpointTensors loaded;
  TrainingProgress p;
  try {
    dir.load_checkpoint(other_model.param_store().table(), other, loaded, p);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("transformer-dim-ffn"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, NonFiniteValuesAreRefusedNamingTheFileAndTheTensor) {
  ModelDir dir(dir_.string());
  dir.create();
  const ParamInfo& second = table().list().at(1);
  std::vector<float> flat = random_params(table(), 7);
  flat[second.offset + 2] = std::numeric_limits<float>::quiet_NaN();
  const std::string weights = (dir_ / "nan.safetensors").string();
  save_weights(weights, table(), model_->config(), flat, 3);
  std::vector<float> loaded;
  std::string error = error_of([&] { load_weights(weights, table(), loaded); });
  EXPECT_NE(error.find(weights), std::string::npos) << error;
  EXPECT_NE(error.find("tensor '" + second.name + "' holds NaN at element 2"), std::string::npos) << error;

  flat[second.offset + 2] = std::numeric_limits<float>::infinity();
  save_weights(weights, table(), model_->config(), flat, 3);
  EXPECT_NE(error_of([&] { load_weights(weights, table(), loaded); }).find("holds an infinity"), std::string::npos);

  // The optimizer state is checked too.
  CheckpointTensors state = random_state(8);
  state.adam_v[5] = -std::numeric_limits<float>::infinity();
  dir.save_checkpoint(table(), model_->config(), state, progress(10));
  CheckpointTensors back;
  TrainingProgress p;
  error = error_of([&] { dir.load_checkpoint(table(), model_->config(), back, p); });
  EXPECT_NE(error.find("optimizer.safetensors"), std::string::npos) << error;
  EXPECT_NE(error.find("tensor 'adam.v' holds an infinity at element 5"), std::string::npos) << error;
}

TEST_F(CheckpointTest, WeightsMustHoldExactlyTheTensorsOfTheirConfig) {
  // Two encoder layers written under a config that says one: loading must not silently drop the second layer.
  ModelConfig two = small_config();
  two.enc_depth = 2;
  EncoderDecoderModel two_layers(two, *backend_);
  const ParamTable& two_table = two_layers.param_store().table();
  std::string extra;
  for (const ParamInfo& p : two_table.list()) {
    bool known = false;
    for (const ParamInfo& q : table().list()) known = known || q.name == p.name;
    if (!known && extra.empty()) extra = p.name;
  }
  ASSERT_FALSE(extra.empty());
  const std::string weights = (dir_ / "two.safetensors").string();
  fs::create_directories(dir_);
  save_weights(weights, two_table, model_->config(), random_params(two_table, 11), 1);
  std::vector<float> loaded;
  std::string error = error_of([&] { load_weights(weights, table(), loaded); });
  EXPECT_NE(error.find(weights), std::string::npos) << error;
  EXPECT_NE(error.find("holds tensor '" + extra + "'"), std::string::npos) << error;

  // And the other way round: a tensor the config needs is missing.
  save_weights(weights, table(), model_->config(), random_params(table(), 12), 1);
  error = error_of([&] { load_weights(weights, two_table, loaded); });
  EXPECT_NE(error.find("has no tensor '" + extra + "'"), std::string::npos) << error;
}

TEST_F(CheckpointTest, ProgressMustMatchItsCheckpointAndKeepsTheVocabularies) {
  ModelDir dir(dir_.string());
  dir.create();
  TrainingProgress saved = progress(10);
  saved.vocabs = {"fnv1a64:1", "fnv1a64:2"};
  dir.save_checkpoint(table(), model_->config(), random_state(13), saved);
  EXPECT_EQ(dir.check_checkpoint("u000000010", model_->config()).vocabs, saved.vocabs);

  // A progress file of another update count in this checkpoint is damaged.
  const fs::path progress_file = dir_ / "checkpoint" / "u000000010" / "progress.yml";
  std::ofstream(progress_file) << progress(12).to_yaml();
  const std::string error = error_of([&] { dir.check_checkpoint("u000000010", model_->config()); });
  EXPECT_NE(error.find("field 'updates' is 12 but the checkpoint is u000000010"), std::string::npos) << error;
}

TEST_F(CheckpointTest, ADamagedLatestIsQuotedShortAndNamesTheCompleteCheckpoints) {
  ModelDir dir(dir_.string());
  dir.create();
  dir.save_checkpoint(table(), model_->config(), random_state(14), progress(10));
  // Incomplete checkpoints do not count.
  fs::create_directories(dir_ / "checkpoint" / "u000000030");
  fs::create_directories(dir_ / "checkpoint" / "u000000040.partial");
  EXPECT_EQ(dir.complete_checkpoints(), std::vector<std::string>{"u000000010"});

  std::string garbage = "\x01\x02";
  for (int i = 0; i < 100; ++i) garbage += "garbage ";
  std::ofstream(dir_ / "checkpoint" / "latest", std::ios::trunc) << garbage;
  const std::string error = error_of([&] { dir.latest_name(); });
  EXPECT_NE(error.find("checkpoint/latest' is damaged"), std::string::npos) << error;
  EXPECT_NE(error.find("'??garbage"), std::string::npos) << error;
  EXPECT_NE(error.find("complete checkpoints found: u000000010"), std::string::npos) << error;
  EXPECT_LT(error.size(), 400u) << error;
  EXPECT_EQ(error.find('\x01'), std::string::npos);

  // A name that would escape the checkpoint directory is no checkpoint either.
  std::ofstream(dir_ / "checkpoint" / "latest", std::ios::trunc) << "../../u000000010\n";
  EXPECT_NE(error_of([&] { dir.latest_name(); }).find("is damaged"), std::string::npos);
}

TEST_F(CheckpointTest, TheLatestIsNeverReplacedAndOnlyCheckpointsAreCleanedUp) {
  ModelDir dir(dir_.string());
  dir.create();
  const CheckpointTensors first = random_state(15);
  dir.save_checkpoint(table(), model_->config(), first, progress(10));
  fs::create_directories(dir_ / "checkpoint" / "notes");  // not lstrain's: stays
  const std::string error =
      error_of([&] { dir.save_checkpoint(table(), model_->config(), random_state(16), progress(10)); });
  EXPECT_NE(error.find("u000000010"), std::string::npos) << error;
  CheckpointTensors loaded;
  TrainingProgress p;
  dir.load_checkpoint(table(), model_->config(), loaded, p);
  EXPECT_EQ(loaded.params, first.params);

  dir.save_checkpoint(table(), model_->config(), random_state(17), progress(20));
  EXPECT_EQ(dir.latest_name(), "u000000020");
  EXPECT_FALSE(fs::exists(dir_ / "checkpoint" / "u000000010"));
  EXPECT_TRUE(fs::exists(dir_ / "checkpoint" / "notes"));
}

TEST_F(CheckpointTest, AModelPathThatIsAFileIsRejected) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  ModelDir dir((dir_ / "file").string());
  EXPECT_THROW(dir.create(), Error);
}

}  // namespace
}  // namespace lseq
