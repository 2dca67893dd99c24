// Recorded decoding steps when the backend cannot record: a backend whose Backend::record throws (a driver that
// refuses stream capture, say) must leave decoding working op by op, with the same log-probabilities and top-k as a
// decoder that never records, after one attempt. (The recordings themselves are CUDA graphs and are checked on the
// GPU: GpuModel.RecordedDecodingStepsEqualOpByOpSteps.)
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"
#include "kernels/cpu/cpu_backend.h"
#include "model_test_util.h"
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

ModelConfig small_config() {
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
  EncoderDecoderModel model(small_config(), backend);
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

}  // namespace
}  // namespace lseq
