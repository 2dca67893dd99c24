// Search over the encoder-decoder model's step model: what beam search and forced scoring (lstranslate, lsscore)
// report must be the model's own teacher-forced log-probabilities of the outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"
#include "core/search/beam_search.h"
#include "core/search/forced_scoring.h"
#include "core/search/search_types.h"
#include "data/vocab.h"
#include "kernels/workspace.h"
#include "model_test_util.h"
#include "whole_rows_decoder.h"
#include "util/error.h"

namespace lseq {
namespace {

ModelConfig search_config(NormPlacement norm) {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = 12;
  c.dim_emb = 8;
  c.enc_depth = c.dec_depth = 2;
  c.heads = 2;
  c.dim_ffn = 16;
  c.norm = norm;
  c.tied = TiedEmbeddings::all;
  c.max_length = 16;
  return c;
}

// A one-sentence batch: source ids + eos, target ids + eos (tgt_in: bos + ids), with the vocabulary's special ids.
data::Batch pair_batch(const std::vector<int32_t>& src_words, const std::vector<int32_t>& tgt_words) {
  data::Batch b;
  b.size = 1;
  b.src = src_words;
  b.src.push_back(data::kEosId);
  b.src_len = static_cast<int>(b.src.size());
  b.tgt_in.push_back(data::kBosId);
  b.tgt_in.insert(b.tgt_in.end(), tgt_words.begin(), tgt_words.end());
  b.tgt_out = tgt_words;
  b.tgt_out.push_back(data::kEosId);
  b.tgt_len = static_cast<int>(b.tgt_out.size());
  b.src_lengths = {b.src_len};
  b.tgt_lengths = {b.tgt_len};
  b.line_ids = {0};
  return b;
}

// Sources of the given word counts over ids [4, vocab), + eos, padded with 0.
data::Batch source_batch(std::mt19937_64& rng, const std::vector<int>& words, int vocab) {
  std::uniform_int_distribution<int> id(4, vocab - 1);
  data::Batch b;
  b.size = static_cast<int>(words.size());
  b.src_len = *std::max_element(words.begin(), words.end()) + 1;
  b.src.assign(static_cast<std::size_t>(b.size) * b.src_len, 0);
  for (int s = 0; s < b.size; ++s) {
    for (int w = 0; w < words[s]; ++w) b.src[static_cast<std::size_t>(s) * b.src_len + w] = id(rng);
    b.src[static_cast<std::size_t>(s) * b.src_len + words[s]] = data::kEosId;
    b.src_lengths.push_back(words[s] + 1);
    b.line_ids.push_back(s);
  }
  return b;
}

std::vector<int32_t> source_words(const data::Batch& b, int s) {
  const auto begin = b.src.begin() + static_cast<std::ptrdiff_t>(s) * b.src_len;
  return {begin, begin + b.src_lengths[s] - 1};
}

TEST(TransformerSearch, BeamSearchReportsTheModelsLogProbabilities) {
  for (NormPlacement norm : {NormPlacement::post, NormPlacement::pre}) {
    auto backend = kernels::make_cpu_backend(2);
    EncoderDecoderModel model(search_config(norm), *backend);
    test::randomize_params(*backend, model.param_store(), 81, 0.3);
    std::mt19937_64 rng(3);
    const data::Batch batch = source_batch(rng, {3, 6, 1}, 12);
    BeamSearchOptions options;
    options.beam_size = 3;
    options.normalize = 0;
    options.max_length_factor = 2;
    int steps = 0;
    for (int s = 0; s < batch.size; ++s)
      steps = std::max(steps, max_output_tokens(source_tokens_without_eos(batch, s), options.max_length_factor) + 1);
    EncoderDecoderStepModel decoder(model, batch.size * options.beam_size, batch.src_len, steps, batch.size);
    const std::vector<NBestList> nbest = beam_search(decoder, batch, options);

    ASSERT_EQ(nbest.size(), 3u);
    kernels::Workspace ws(*backend, model.workspace_bytes(64, 16, false), "test");
    for (int s = 0; s < batch.size; ++s) {
      ASSERT_EQ(nbest[s].size(), 3u) << "sentence " << s;
      for (std::size_t k = 0; k < nbest[s].size(); ++k) {
        const Hypothesis& hyp = nbest[s][k];
        if (k > 0) EXPECT_GE(nbest[s][k - 1].score, hyp.score);
        std::vector<double> nll;
        model.forward_loss(pair_batch(source_words(batch, s), hyp.tokens), ws, &nll);
        EXPECT_NEAR(hyp.log_prob, -nll[0], 1e-4 * nll[0]) << "sentence " << s << " hypothesis " << k;
      }
    }
  }
}

TEST(TransformerSearch, ForcedScoringEqualsTheTeacherForcedLoss) {
  auto backend = kernels::make_cpu_backend(2);
  EncoderDecoderModel model(search_config(NormPlacement::pre), *backend);
  test::randomize_params(*backend, model.param_store(), 91, 0.3);
  std::mt19937_64 rng(4);
  data::Batch batch = test::random_batch(rng, 5, 1, 9, 12);  // its own eos/bos ids: the model does not care
  kernels::Workspace ws(*backend, model.workspace_bytes(64, 16, false), "test");
  std::vector<double> nll;
  model.forward_loss(batch, ws, &nll);
  EncoderDecoderStepModel decoder(model, batch.size, batch.src_len, batch.tgt_len);
  const auto word_log_probs = forced_word_log_probs(decoder, batch);  // selects as sentences finish
  for (int s = 0; s < batch.size; ++s) {
    ASSERT_EQ(word_log_probs[s].size(), static_cast<std::size_t>(batch.tgt_lengths[s]));
    EXPECT_NEAR(sum_log_probs(word_log_probs[s]), -nll[s], 1e-4 * nll[s]) << "sentence " << s;
  }
}

// lsscore's step gathers each next token's log-probability on the device: the very values of the whole rows.
TEST(TransformerSearch, GatheredForcedScoresAreTheWholeRowsValues) {
  auto backend = kernels::make_cpu_backend(2);
  EncoderDecoderModel model(search_config(NormPlacement::pre), *backend);
  test::randomize_params(*backend, model.param_store(), 93, 0.3);
  std::mt19937_64 rng(6);
  const data::Batch batch = test::random_batch(rng, 6, 1, 11, 12);
  EncoderDecoderStepModel gathering(model, batch.size, batch.src_len, batch.tgt_len);
  EncoderDecoderStepModel inner(model, batch.size, batch.src_len, batch.tgt_len);
  test::WholeRowsDecoder whole_rows(inner);
  const auto got = forced_word_log_probs(gathering, batch);
  const auto want = forced_word_log_probs(whole_rows, batch);
  ASSERT_EQ(got.size(), want.size());
  for (int s = 0; s < batch.size; ++s) {
    ASSERT_EQ(got[s].size(), static_cast<std::size_t>(batch.tgt_lengths[s])) << "sentence " << s;
    EXPECT_EQ(got[s], want[s]) << "sentence " << s;
  }
  // An id outside the vocabulary is refused before the step.
  gathering.start(batch.src, batch.src_lengths, batch.size, batch.src_len);
  std::vector<float> scores;
  std::vector<int32_t> next(static_cast<std::size_t>(batch.size), 3);
  next[1] = gathering.vocab_size();
  EXPECT_THROW(gathering.step_scores(std::vector<int32_t>(batch.size, data::kBosId), next, scores), Error);
}

}  // namespace
}  // namespace lseq
