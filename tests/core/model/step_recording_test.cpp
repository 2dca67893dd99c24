// Recorded decoding steps on the CPU: a backend whose Backend::record throws (a driver that refuses stream capture,
// say) must leave decoding working op by op, with the same log-probabilities and top-k as a decoder that never
// records, after one attempt; and which shapes are recorded, replayed and dropped. (The recordings themselves are
// CUDA graphs and are checked on the GPU: GpuModel.RecordedDecodingStepsEqualOpByOpSteps.)
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"
#include "core/model/step_sharing.h"
#include "kernels/cpu/cpu_backend.h"
#include "model_test_util.h"
#include "recording_backends.h"
#include "util/error.h"

namespace lseq {
namespace {

class RefusingRecorder : public kernels::CpuBackend {
 public:
  RefusingRecorder() : kernels::CpuBackend(2) {}
  std::unique_ptr<kernels::OpGraph> record(const std::function<void()>&) override {
    ++attempts;
    fail("this backend refuses to record (test)");
  }
  int attempts = 0;
};

ModelConfig recording_config() {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = 17;
  c.dim_emb = 8;
  c.enc_depth = c.dec_depth = 2;
  c.heads = 2;
  c.dim_ffn = 16;
  c.norm = NormPlacement::post;
  c.tied = TiedEmbeddings::all;
  c.max_length = 16;
  return c;
}

TEST(StepRecording, ABackendThatCannotRecordLeavesDecodingOpByOp) {
  RefusingRecorder backend;
  EncoderDecoderModel model(recording_config(), backend);
  test::randomize_params(backend, model.param_store(), 41, 0.3);
  const int sentences = 3, src_len = 5, steps = 6, k = 4;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int32_t> token(3, 16);
  std::vector<int32_t> src(sentences * src_len);
  for (int32_t& id : src) id = token(rng);
  const std::vector<int32_t> lengths(sentences, src_len);

  EncoderDecoderStepModel recording(model, sentences, src_len, steps), plain(model, sentences, src_len, steps);
  plain.use_graphs(false);
  recording.start(src, lengths, sentences, src_len);
  plain.start(src, lengths, sentences, src_len);
  std::vector<int32_t> tokens(sentences, 2);  // bos; then every row feeds its best token (greedy)
  for (int t = 0; t < steps; ++t) {
    std::vector<float> got_values, want_values, got_eos, want_eos;
    std::vector<int32_t> got_ids, want_ids;
    const bool topk = t / 2 % 2 == 0;  // both kinds of step, each twice in a row (a shape recurs at once)
    if (topk) {
      recording.step_topk(tokens, k, got_values, got_ids, got_eos);
      plain.step_topk(tokens, k, want_values, want_ids, want_eos);
    } else {
      recording.step(tokens, got_values);
      plain.step(tokens, want_values);
    }
    ASSERT_EQ(got_values, want_values) << "step " << t;
    ASSERT_EQ(got_ids, want_ids) << "step " << t;
    ASSERT_EQ(got_eos, want_eos) << "step " << t;
    for (int s = 0; s < sentences; ++s) {
      tokens[s] =
          topk ? got_ids[static_cast<std::size_t>(s) * k]
               : static_cast<int32_t>(std::max_element(got_values.begin() + s * 17, got_values.begin() + (s + 1) * 17) -
                                      (got_values.begin() + s * 17));
    }
  }
  // The second step repeated the first one's shape, so recording was tried there; after that first refusal the
  // decoder stopped trying.
  EXPECT_EQ(backend.attempts, 1);
  EXPECT_EQ(recording.recorded_graphs(), 0u);
}

using test::CountingRecorder;

// Steps are padded to shapes that repeat only where they can be recorded: on the CPU padded rows are pure work.
TEST(StepRecording, StepsArePaddedOnlyOnABackendThatRecords) {
  CountingRecorder recording;
  kernels::CpuBackend cpu(1);
  EXPECT_EQ(StepRecorder(recording).rows(3, 64), step_rows(3, 64));
  EXPECT_EQ(StepRecorder(recording).rows(3, 64), 8);
  EXPECT_EQ(StepRecorder(recording).rows(70, 72), 72);
  EXPECT_EQ(StepRecorder(cpu).rows(3, 64), 3);
  EXPECT_EQ(StepRecorder(cpu).rows(70, 64), 64);
}

// run_step: a step's shape is its bucketed rows and k, recorded at its second use in a row; each step's live and
// computed rows are counted (how full the steps ran), encodings are not steps.
TEST(StepRecording, StepsAreRecordedWhenTheirShapeRepeatsAndCounted) {
  CountingRecorder backend;
  StepRecorder recorder(backend);
  int runs = 0;
  const auto ops = [&] { ++runs; };
  recorder.run_step(100, 512, 4, ops);      // 112 rows: op by op
  recorder.run_step(97, 512, 4, ops);       // 112 rows again: recorded (and replayed)
  recorder.run_step(99, 512, 4, ops);       // replayed
  recorder.run_step(99, 512, 2, ops);       // another k: op by op
  recorder.run({0, 8, 16, -1}, true, ops);  // an encoding: not a step
  EXPECT_EQ(runs, 4);
  EXPECT_EQ(recorder.recordings(), 2u);
  const StepModel::RunCounts counts = recorder.run_counts();
  EXPECT_EQ(counts.steps, 4u);
  EXPECT_EQ(counts.live_rows, 100u + 97u + 99u + 99u);
  EXPECT_EQ(counts.computed_rows, 4u * 112u);
  EXPECT_EQ(counts.op_by_op, 2u);
  EXPECT_EQ(counts.replays, 1u);  // the third step (a recording's first replay is not counted)
  EXPECT_EQ(backend.replays, 3);  // after each of the two recordings, and the third step

  kernels::CpuBackend cpu(1);
  StepRecorder exact(cpu);
  exact.run_step(100, 512, 4, ops);
  EXPECT_EQ(exact.run_counts().computed_rows, 100u) << "no padding where nothing records";
}

TEST(StepRecording, StepsOfBatchesOfAnotherSizeReplayTheSameRecording) {
  // A server's batches come in every size: a step's ops must depend on its bucketed rows and k only, or each size
  // would record its own steps (issue 27).
  CountingRecorder backend;
  EncoderDecoderModel model(recording_config(), backend);
  test::randomize_params(backend, model.param_store(), 43, 0.3);
  const int max_sentences = 8, src_len = 5, k = 2;
  EncoderDecoderStepModel decoder(model, max_sentences, src_len, 8, max_sentences);
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int32_t> token(3, 16);
  std::vector<float> values, eos;
  std::vector<int32_t> ids;
  auto run_batch = [&](int sentences) {
    std::vector<int32_t> src(static_cast<std::size_t>(sentences) * src_len);
    for (int32_t& id : src) id = token(rng);
    decoder.start(src, std::vector<int32_t>(sentences, src_len), sentences, src_len);
    for (int t = 0; t < 3; ++t) decoder.step_topk(std::vector<int32_t>(sentences, token(rng)), k, values, ids, eos);
  };
  run_batch(3);  // 3 live rows bucket to 8: the second step records that shape, the third replays it
  EXPECT_EQ(decoder.recorder().recordings(), 1u);
  EXPECT_EQ(backend.replays, 2);
  run_batch(5);  // 5 sentences: the same bucketed rows, so all 3 steps replay; the encoding (3 and 5 sentences
                 // both bucket to 8) has now been seen twice and is recorded
  EXPECT_EQ(decoder.recorder().recordings(), 2u);
  EXPECT_EQ(backend.replays, 2 + 1 + 3);
  run_batch(6);  // encoding and steps all replay
  EXPECT_EQ(decoder.recorder().recordings(), 2u);
  EXPECT_EQ(backend.replays, 6 + 1 + 3);
}

TEST(StepRecording, AFullRecorderDropsTheLeastRecentlyReplayedShape) {
  CountingRecorder backend;
  StepRecorder recorder(backend);
  int runs = 0;
  const auto ops = [&] { ++runs; };
  const int capacity = static_cast<int>(StepRecorder::kMaxGraphs);
  for (int s = 0; s < capacity; ++s) recorder.run({s, 0, 0, 0}, true, ops);
  ASSERT_EQ(recorder.graphs(), StepRecorder::kMaxGraphs);
  ASSERT_EQ(backend.replays, capacity);
  recorder.run({0, 0, 0, 0}, true, ops);  // replayed: now the most recent
  EXPECT_EQ(backend.replays, capacity + 1);
  recorder.run({capacity, 0, 0, 0}, true, ops);  // a new shape: shape 1, the least recent, makes room
  EXPECT_EQ(recorder.graphs(), StepRecorder::kMaxGraphs);
  EXPECT_EQ(recorder.recordings(), StepRecorder::kMaxGraphs + 1);
  const int recorded_runs = runs;
  recorder.run({0, 0, 0, 0}, true, ops);  // still there
  recorder.run({2, 0, 0, 0}, true, ops);  // still there
  EXPECT_EQ(runs, recorded_runs);
  EXPECT_EQ(backend.replays, capacity + 4);
  recorder.run({1, 0, 0, 0}, true, ops);  // dropped: recorded again
  EXPECT_EQ(runs, recorded_runs + 1);
  EXPECT_EQ(recorder.recordings(), StepRecorder::kMaxGraphs + 2);
}

// --max-recorded-steps: a lower limit drops the least recently replayed recordings at once and keeps the count
// there; 0 records nothing (every op runs op by op).
TEST(StepRecording, ALimitBoundsTheRecordingsHeld) {
  CountingRecorder backend;
  StepRecorder recorder(backend);
  int runs = 0;
  const auto ops = [&] { ++runs; };
  for (int s = 0; s < 5; ++s) recorder.run({s, 0, 0, 0}, true, ops);
  recorder.run({1, 0, 0, 0}, true, ops);  // replayed: shape 1 is now the most recent
  ASSERT_EQ(recorder.graphs(), 5u);
  recorder.limit(2);  // keeps shapes 4 and 1
  EXPECT_EQ(recorder.graphs(), 2u);
  const int before = runs;
  recorder.run({4, 0, 0, 0}, true, ops);
  recorder.run({1, 0, 0, 0}, true, ops);
  EXPECT_EQ(runs, before) << "the two most recent recordings replay";
  recorder.run({0, 0, 0, 0}, true, ops);  // dropped: recorded again, in place of shape 4
  EXPECT_EQ(runs, before + 1);
  EXPECT_EQ(recorder.graphs(), 2u);
  EXPECT_EQ(recorder.recordings(), 6u);

  recorder.limit(0);
  EXPECT_EQ(recorder.graphs(), 0u);
  const int replays = backend.replays;
  recorder.run({1, 0, 0, 0}, true, ops);
  recorder.run({1, 0, 0, 0}, true, ops);
  EXPECT_EQ(runs, before + 3) << "with no recordings allowed, every call runs its ops";
  EXPECT_EQ(backend.replays, replays);
  EXPECT_EQ(recorder.recordings(), 6u);
}

}  // namespace
}  // namespace lseq
