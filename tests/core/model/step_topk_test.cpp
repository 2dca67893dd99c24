// beam_search reads only each hypothesis' best beam_size words (StepModel::step_topk) plus eos; these tests check
// that this gives exactly the n-best lists of the search that ranked every token of the full distribution
// (full_beam_search.h): on the toy decoder (host top-k), on a copy of it whose log-probabilities tie often, and on
// a tiny random encoder-decoder model (the backend's topk_log_softmax), over beam sizes, normalisation, word penalty and a
// length limit that forces eos.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"
#include "core/search/beam_search.h"
#include "core/search/search_test_util.h"
#include "data/translation_input.h"
#include "full_beam_search.h"
#include "model_test_util.h"

namespace lseq {
namespace {

using testing::ToyStepModel;

// The toy model with log-probabilities rounded to multiples of 1/4: many exact ties between tokens and between
// hypotheses, so the tie rule decides. Only step() is overridden: step_topk is StepModel's default.
class TiedToyDecoder : public ToyStepModel {
 public:
  using ToyStepModel::ToyStepModel;
  void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) override {
    ToyStepModel::step(tokens, log_probs);
    for (float& lp : log_probs) lp = std::round(lp * 4.0f) / 4.0f;
  }
};

std::string describe(const BeamSearchOptions& o) {
  return "beam " + std::to_string(o.beam_size) + " normalize " + std::to_string(o.normalize) + " word penalty " +
         std::to_string(o.word_penalty) + " max length factor " + std::to_string(o.max_length_factor);
}

void expect_same_lists(const std::vector<NBestList>& got, const std::vector<NBestList>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t s = 0; s < want.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size()) << what << " sentence " << s;
    for (std::size_t h = 0; h < want[s].size(); ++h) {
      const std::string at = what + " sentence " + std::to_string(s) + " hypothesis " + std::to_string(h);
      EXPECT_EQ(got[s][h].tokens, want[s][h].tokens) << at;
      EXPECT_EQ(got[s][h].word_log_probs, want[s][h].word_log_probs) << at;
      EXPECT_EQ(got[s][h].log_prob, want[s][h].log_prob) << at;
      EXPECT_EQ(got[s][h].score, want[s][h].score) << at;
    }
  }
}

std::vector<BeamSearchOptions> option_grid(const std::vector<int>& beams) {
  std::vector<BeamSearchOptions> grid;
  for (int beam : beams)
    for (double normalize : {0.0, 0.6})
      for (double word_penalty : {0.0, 0.7})
        for (double factor : {0.5, 2.0}) {  // 0.5: eos forced after half the source length
          BeamSearchOptions o;
          o.beam_size = beam;
          o.normalize = normalize;
          o.word_penalty = word_penalty;
          o.max_length_factor = factor;
          grid.push_back(o);
        }
  return grid;
}

template <typename Decoder>
void expect_toy_equivalence(int vocab, uint64_t seed, double eos_bias) {
  const auto sources = testing::random_sources(7, vocab, 1, 8, seed * 11);
  const data::Batch batch = data::make_source_batch(sources, test::line_ids(sources.size()));
  for (const BeamSearchOptions& o : option_grid({1, 2, 4})) {
    Decoder full_decoder(vocab, seed, eos_bias), topk_decoder(vocab, seed, eos_bias);
    const auto want = testing::full_distribution_beam_search(full_decoder, batch, o);
    const auto got = beam_search(topk_decoder, batch, o);
    expect_same_lists(got, want, "vocab " + std::to_string(vocab) + " seed " + std::to_string(seed) + " " + describe(o));
  }
}

TEST(BeamSearchTopK, ToyDecoderGivesTheFullDistributionsNBestLists) {
  expect_toy_equivalence<ToyStepModel>(30, 5, -1.0);
  expect_toy_equivalence<ToyStepModel>(6, 6, -0.5);  // two words only: fewer than k for beam 4
}

TEST(BeamSearchTopK, TiedLogProbabilitiesGiveTheFullDistributionsNBestLists) {
  expect_toy_equivalence<TiedToyDecoder>(30, 7, -1.0);
  expect_toy_equivalence<TiedToyDecoder>(9, 8, 0.0);
}

ModelConfig tiny_config() {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = 40;
  c.dim_emb = 8;
  c.enc_depth = c.dec_depth = 1;
  c.heads = 2;
  c.dim_ffn = 16;
  c.tied = TiedEmbeddings::all;
  c.max_length = 32;
  return c;
}

TEST(BeamSearchTopK, TransformerGivesTheFullDistributionsNBestLists) {
  auto backend = kernels::make_cpu_backend(2);
  EncoderDecoderModel model(tiny_config(), *backend);
  test::randomize_params(*backend, model.param_store(), 97, 0.5);
  const auto sources = testing::random_sources(5, 40, 1, 7, 123);
  const data::Batch batch = data::make_source_batch(sources, test::line_ids(sources.size()));
  // beam 33 takes the top-k of k above 32; kMaxTopK + 1 is above the limit: the decoder falls back to step() and
  // the host.
  for (const BeamSearchOptions& o : option_grid({1, 2, 4, 33, kernels::kMaxTopK + 1})) {
    int steps = 0;
    for (int s = 0; s < batch.size; ++s)
      steps = std::max(steps, max_output_tokens(source_tokens_without_eos(batch, s), o.max_length_factor) + 1);
    EncoderDecoderStepModel full_decoder(model, batch.size * o.beam_size, batch.src_len, steps, batch.size);
    EncoderDecoderStepModel topk_decoder(model, batch.size * o.beam_size, batch.src_len, steps, batch.size);
    const auto want = testing::full_distribution_beam_search(full_decoder, batch, o);
    const auto got = beam_search(topk_decoder, batch, o);
    expect_same_lists(got, want, "transformer " + describe(o));
    // The lists are real: the grid's settings produce full n-best lists of more than one hypothesis for beam > 1.
    if (o.beam_size > 1 && o.beam_size < 33) EXPECT_EQ(got[0].size(), static_cast<std::size_t>(o.beam_size));
  }
}

}  // namespace
}  // namespace lseq
