// The decoders' warm-up (warm_up_decoding, run by the model loader on a GPU with --warm-up): it meets every
// class of encoding (prefill) and step rows a batch within the planned limits meets, without going past them; it
// records no step; and searches after it give exactly the n-best lists of a decoder that never warmed up
// (translation batch by batch and continuously, language models).
#include "core/model/decoder_warm_up.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"
#include "core/model/lm/decoder_only_model.h"
#include "core/model/lm/decoder_only_step_model.h"
#include "core/model/step_sharing.h"
#include "core/search/beam_search.h"
#include "data/translation_input.h"
#include "forwarding_step_model.h"
#include "lm_test_util.h"
#include "model_test_util.h"
#include "recording_backends.h"
#include "sentence_feed.h"

namespace lseq {
namespace {

using test::CountingRecorder;
using test::PaddingBackend;

// Forwards to `inner` and notes every start (sentences, length), admission and step (live hypotheses).
class ShapeLog : public test::ForwardingStepModel {
 public:
  using ForwardingStepModel::ForwardingStepModel;
  void start(const std::vector<int32_t>& src, const std::vector<int32_t>& lengths, int sentences,
             int src_len) override {
    started.push_back({sentences, src_len});
    inner_.start(src, lengths, sentences, src_len);
  }
  void admit(const std::vector<int32_t>& src, const std::vector<int32_t>& lengths, int sentences,
             int src_len) override {
    ++admissions;
    inner_.admit(src, lengths, sentences, src_len);
  }
  void step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values, std::vector<int32_t>& ids,
                 std::vector<float>& eos_log_probs) override {
    stepped.push_back(inner_.live());
    inner_.step_topk(tokens, k, values, ids, eos_log_probs);
  }

  std::vector<std::pair<int, int>> started;  // (sentences, source length)
  std::vector<int64_t> stepped;
  int admissions = 0;
};

ModelConfig warm_up_config() {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = 20;
  c.dim_emb = 16;
  c.enc_depth = c.dec_depth = 2;
  c.heads = 2;
  c.dim_ffn = 32;
  c.norm = NormPlacement::pre;
  c.tied = TiedEmbeddings::all;
  c.max_length = 64;
  return c;
}

// The classes (8 times a power of `growth`) that `rows` fall into.
std::set<int64_t> classes_of(const std::vector<int64_t>& rows, int growth = 2) {
  std::set<int64_t> classes;
  for (int64_t n : rows) {
    int64_t c = 8;
    while (c < n) c *= growth;
    classes.insert(c);
  }
  return classes;
}

// Every class from 8 up to the one holding `most`.
std::set<int64_t> classes_up_to(int64_t most, int growth = 2) {
  std::set<int64_t> classes;
  for (int64_t c = 8;; c *= growth) {
    classes.insert(c);
    if (c >= most) return classes;
  }
}

void expect_identical(const std::vector<NBestList>& got, const std::vector<NBestList>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t s = 0; s < want.size(); ++s) {
    ASSERT_EQ(got[s].size(), want[s].size()) << "sentence " << s;
    for (std::size_t k = 0; k < want[s].size(); ++k) {
      EXPECT_EQ(got[s][k].tokens, want[s][k].tokens) << "sentence " << s << " hypothesis " << k;
      EXPECT_EQ(got[s][k].word_log_probs, want[s][k].word_log_probs) << "sentence " << s << " hypothesis " << k;
      EXPECT_EQ(got[s][k].score, want[s][k].score) << "sentence " << s << " hypothesis " << k;
    }
  }
}

// The classes of rows a decoder meets: starts of every count and length within the limits (lengths up to 64), and
// steps of every live count, padded as the decoder pads them.
std::set<int64_t> start_classes(const std::vector<std::pair<int, int>>& starts, int sentences, int src_len) {
  std::vector<int64_t> rows;
  for (const auto& [count, len] : starts)
    rows.push_back(int64_t{step_rows(count, sentences)} * step_rows(len, src_len));
  return classes_of(rows);
}
std::set<int64_t> step_classes(const std::vector<int64_t>& live, int hypotheses) {
  std::vector<int64_t> rows;
  for (int64_t n : live) rows.push_back(step_rows(static_cast<int>(n), hypotheses));
  return classes_of(rows);
}

// The classes met, for translation decoders of several limits (a model that cannot go past a limit fails loudly,
// so staying within them is checked by the decoder itself): every class a batch could meet, each step class once.
TEST(DecoderWarmUp, MeetsEveryRowClassWithinTheLimits) {
  PaddingBackend backend;
  EncoderDecoderModel model(warm_up_config(), backend);
  test::randomize_params(backend, model.param_store(), 3, 0.5);
  struct Limits {
    int sentences, beam, src_len, tgt_len;
  };
  for (const Limits l :
       {Limits{24, 4, 20, 41}, Limits{1, 1, 9, 3}, Limits{5, 3, 64, 10}, Limits{3, 2, 100, 5}, Limits{40, 1, 9, 2}}) {
    SCOPED_TRACE(std::to_string(l.sentences) + " sentences, beam " + std::to_string(l.beam));
    EncoderDecoderStepModel inner(model, l.sentences * l.beam, l.src_len, l.tgt_len, l.sentences);
    ShapeLog decoder(inner);
    const int hypotheses = l.sentences * l.beam;
    const int calls = warm_up_decoding(decoder, WarmUpLimits{l.sentences, hypotheses, l.src_len});
    EXPECT_GE(static_cast<std::size_t>(calls),
              decoder.started.size() + static_cast<std::size_t>(decoder.admissions) + decoder.stepped.size());
    std::vector<std::pair<int, int>> every_start;
    std::vector<int64_t> every_live;
    for (int count = 1; count <= l.sentences; ++count)
      for (int len = 1; len <= std::min(l.src_len, 64); ++len) every_start.push_back({count, len});
    for (int n = 1; n <= hypotheses; ++n) every_live.push_back(n);
    EXPECT_EQ(start_classes(decoder.started, l.sentences, l.src_len),
              start_classes(every_start, l.sentences, l.src_len));
    EXPECT_EQ(step_classes(decoder.stepped, hypotheses), step_classes(every_live, hypotheses));
    EXPECT_EQ(decoder.stepped.size(), step_classes(every_live, hypotheses).size());  // each once
    if (l.sentences > 1) EXPECT_GT(decoder.admissions, 0);
    EXPECT_GT(inner.run_counts().op_by_op, 0u);
  }
}

// No step shape runs twice, so no step is recorded: stepping after the warm-up at a live count it met runs op by op
// once more and then records (a step's recording comes at its shape's second use in a row), as in a fresh decoder.
TEST(DecoderWarmUp, RecordsNoStep) {
  CountingRecorder backend;
  EncoderDecoderModel model(warm_up_config(), backend);
  test::randomize_params(backend, model.param_store(), 9, 0.5);
  EncoderDecoderStepModel decoder(model, 21, 8, 30, 7);
  warm_up_decoding(decoder, WarmUpLimits{7, 21, 8});
  const StepModel::RunCounts warmed = decoder.run_counts();
  EXPECT_EQ(decoder.recorded_steps().held, warmed.recordings);
  decoder.start(std::vector<int32_t>(7 * 3, 9), std::vector<int32_t>(7, 3), 7, 3);
  std::vector<float> values, eos;
  std::vector<int32_t> ids;
  const StepModel::RunCounts started = decoder.run_counts();
  decoder.step_topk(std::vector<int32_t>(7, 5), 1, values, ids, eos);  // the warm-up's k, its first class
  EXPECT_EQ(decoder.run_counts().op_by_op, started.op_by_op + 1);      // not replayed: the warm-up recorded no step
  decoder.step_topk(std::vector<int32_t>(7, 5), 1, values, ids, eos);
  EXPECT_EQ(decoder.run_counts().recordings, started.recordings + 1);
}

// Beam search batch by batch and continuously, after a warm-up, gives bit for bit the lists of a fresh decoder.
TEST(DecoderWarmUp, SearchesAfterItGiveTheListsOfAFreshDecoder) {
  PaddingBackend backend;
  EncoderDecoderModel model(warm_up_config(), backend);
  test::randomize_params(backend, model.param_store(), 7, 0.5);
  std::mt19937_64 rng(11);
  const int max_words = 9;
  const auto sources = test::random_sources(rng, 21, max_words, 20);
  BeamSearchOptions options;
  options.beam_size = 3;
  options.normalize = 0.6;
  options.max_length_factor = 2;
  const int limit = max_output_tokens(max_words, options.max_length_factor) + 1;
  const data::Batch batch = data::make_source_batch(sources, test::line_ids(sources.size()));
  const WarmUpLimits limits{21, 21 * options.beam_size, max_words + 1};

  EncoderDecoderStepModel fresh(model, 21 * options.beam_size, max_words + 1, limit, 21);
  EncoderDecoderStepModel warmed(model, 21 * options.beam_size, max_words + 1, limit, 21);
  ASSERT_GT(warm_up_decoding(warmed, limits), 0);
  expect_identical(beam_search(warmed, batch, options), beam_search(fresh, batch, options));

  // Continuously, four sentences at a time: admissions into the slots the warm-up used.
  auto continuous = [&](EncoderDecoderStepModel& decoder) {
    std::size_t next = 0;
    std::map<int64_t, NBestList> got;
    beam_search_continuous(decoder, test::feed_of(sources, next), options,
                           [&](int64_t line, const NBestList& list) { got[line] = list; });
    std::vector<NBestList> lists;
    for (const auto& entry : got) lists.push_back(entry.second);
    return lists;
  };
  EncoderDecoderStepModel fresh4(model, 4 * options.beam_size, max_words + 1, 3 * limit, 4);
  EncoderDecoderStepModel warmed4(model, 4 * options.beam_size, max_words + 1, 3 * limit, 4);
  warm_up_decoding(warmed4, WarmUpLimits{4, 4 * options.beam_size, max_words + 1});
  const std::vector<NBestList> want = continuous(fresh4);
  ASSERT_EQ(want.size(), sources.size());
  expect_identical(continuous(warmed4), want);
}

// A language model's prefills (prompts unpadded, all a start's tokens together, in pieces): each class of rows up to
// the largest piece once, in the classes of the backend's growth, and its steps' classes once each.
TEST(DecoderWarmUp, LanguageModelsMeetEachPrefillClassOnce) {
  PaddingBackend backend;
  DecoderOnlyModel model(test::tiny_lm_config(), backend);
  test::randomize_params(backend, model.param_store(), 6, 0.3);
  struct Limits {
    int sentences, beam, prompt, piece, growth;
  };
  for (const Limits l : {Limits{6, 2, 10, 40, 4}, Limits{6, 1, 10, 40, 2}, Limits{3, 1, 4, 2048, 4},
                         Limits{20, 1, 3, 16, 4}, Limits{2, 1, 1, 2048, 4}}) {
    SCOPED_TRACE(std::to_string(l.sentences) + " prompts of " + std::to_string(l.prompt) + ", pieces of " +
                 std::to_string(l.piece) + ", growth " + std::to_string(l.growth));
    const int hypotheses = l.sentences * l.beam;
    DecoderOnlyStepModel inner(model, hypotheses, l.prompt, 8, l.sentences);
    inner.set_prefill_chunk(l.piece);
    ShapeLog decoder(inner);
    WarmUpLimits limits{l.sentences, hypotheses, l.prompt};
    limits.prefill_piece = l.piece;
    limits.row_class_growth = l.growth;
    warm_up_decoding(decoder, limits);
    std::vector<int64_t> prefilled, every_piece;  // the prompt tokens of each start that prefilled some
    for (const auto& [count, len] : decoder.started)
      if (len > 1) prefilled.push_back(int64_t{count} * (len - 1));  // a prompt's last token goes to the first step
    const int64_t most = std::min<int64_t>(l.piece, int64_t{l.sentences} * (l.prompt - 1));
    for (int64_t n = 1; n <= most; ++n) every_piece.push_back(n);
    EXPECT_EQ(classes_of(prefilled, l.growth), classes_of(every_piece, l.growth));
    EXPECT_EQ(prefilled.size(), classes_of(every_piece, l.growth).size());  // each once
    for (int64_t n : prefilled) EXPECT_LE(n, l.piece);
    EXPECT_EQ(classes_of(decoder.stepped, l.growth), classes_up_to(hypotheses, l.growth));
    EXPECT_EQ(decoder.stepped.size(), classes_up_to(hypotheses, l.growth).size());
  }
}

// A language model (prompts prefilled, no admissions): the classes, and generation after it, warmed as the loader
// warms one and as a translation decoder.
TEST(DecoderWarmUp, LanguageModelsGenerateAsFreshOnes) {
  PaddingBackend backend;
  DecoderOnlyModel model(test::tiny_lm_config(), backend);
  test::randomize_params(backend, model.param_store(), 5, 0.3);
  std::mt19937_64 rng(5);
  const auto prompts = test::random_lines(rng, 6, 1, 8, 13);
  const data::Batch batch = data::make_source_batch(prompts, test::line_ids(prompts.size()));
  BeamSearchOptions options;
  options.beam_size = 2;
  options.max_new_tokens = 7;

  DecoderOnlyStepModel fresh(model, 12, 10, 8, 6);
  DecoderOnlyStepModel warmed(model, 12, 10, 8, 6);
  ShapeLog log(warmed);
  warm_up_decoding(log, WarmUpLimits{6, 12, 10});
  EXPECT_EQ(classes_of(log.stepped), classes_up_to(12));
  EXPECT_EQ(log.admissions, 0);
  expect_identical(beam_search(warmed, batch, options), beam_search(fresh, batch, options));

  // Against a fresh decoder that prefills in the same pieces: whole and piecewise prefills are equal only up to
  // rounding on the CPU, since OpenBLAS's AVX2 kernels (Haswell, Zen) sum a row's products in an order that depends
  // on where the row falls in the product's rows (lm_step_model_test bounds that difference).
  DecoderOnlyStepModel fresh_in_pieces(model, 12, 10, 8, 6), warmed_in_pieces(model, 12, 10, 8, 6);
  fresh_in_pieces.set_prefill_chunk(16);
  warmed_in_pieces.set_prefill_chunk(16);
  WarmUpLimits pieces{6, 12, 10};
  pieces.prefill_piece = 16;
  pieces.row_class_growth = 4;
  ASSERT_GT(warm_up_decoding(warmed_in_pieces, pieces), 0);
  expect_identical(beam_search(warmed_in_pieces, batch, options), beam_search(fresh_in_pieces, batch, options));
}

}  // namespace
}  // namespace lseq
