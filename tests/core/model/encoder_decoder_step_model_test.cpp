// Incremental decoding of the encoder-decoder model: step-by-step log-probabilities against the full teacher-forced forward
// pass, cache re-indexing by select(), sharing of a sentence's encoder state between its hypotheses, independence
// of batch padding, and the limits planned at construction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"
#include "kernels/workspace.h"
#include "model_test_util.h"
#include "util/error.h"

namespace lseq {
namespace {

constexpr int kStepVocab = 13;

struct Variant {
  NormPlacement norm;
  TiedEmbeddings tied;
  kernels::Activation act;
  const char* name;
};

const std::vector<Variant> kVariants = {
    {NormPlacement::post, TiedEmbeddings::none, kernels::Activation::relu, "post-norm, untied, relu"},
    {NormPlacement::pre, TiedEmbeddings::target, kernels::Activation::gelu, "pre-norm, tied target, gelu"},
    {NormPlacement::post, TiedEmbeddings::all, kernels::Activation::gelu, "post-norm, tied all, gelu"},
    {NormPlacement::pre, TiedEmbeddings::none, kernels::Activation::relu, "pre-norm, untied, relu"},
};

ModelConfig tiny_config(const Variant& v) {
  ModelConfig c;
  c.src_vocab = v.tied == TiedEmbeddings::all ? kStepVocab : 11;
  c.tgt_vocab = kStepVocab;
  c.dim_emb = 8;
  c.enc_depth = 2;
  c.dec_depth = 2;
  c.heads = 2;
  c.dim_ffn = 16;
  c.activation = v.act;
  c.dropout = c.dropout_attention = c.dropout_ffn = 0.3f;  // decoding must not apply any of it
  c.norm = v.norm;
  c.tied = v.tied;
  c.max_length = 16;
  return c;
}

struct Model {
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend(2);
  std::unique_ptr<EncoderDecoderModel> transformer;
  explicit Model(const Variant& v, uint64_t seed = 21) {
    transformer = std::make_unique<EncoderDecoderModel>(tiny_config(v), *backend);
    test::randomize_params(*backend, transformer->param_store(), seed, 0.3);
  }
};

std::vector<double> log_softmax_double(const float* x, int n) {
  double max = x[0];
  for (int v = 1; v < n; ++v) max = std::max(max, static_cast<double>(x[v]));
  double sum = 0;
  for (int v = 0; v < n; ++v) sum += std::exp(x[v] - max);
  std::vector<double> y(n);
  for (int v = 0; v < n; ++v) y[v] = x[v] - max - std::log(sum);
  return y;
}

// |got - expected| <= tol * (1 + |expected|) for each of the vocab entries; reports the first difference.
::testing::AssertionResult rows_close(const float* got, const float* expected, int n, double tol) {
  for (int v = 0; v < n; ++v) {
    if (!(std::abs(got[v] - expected[v]) <= tol * (1 + std::abs(expected[v])))) {
      return ::testing::AssertionFailure() << "entry " << v << ": " << got[v] << " vs " << expected[v];
    }
  }
  return ::testing::AssertionSuccess();
}

// Sources: rows of ids + eos, padded with 0 to src_len.
struct Sources {
  std::vector<int32_t> ids, lengths;
  int count = 0, len = 0;
};

Sources random_sources(std::mt19937_64& rng, const std::vector<int>& lengths, int src_vocab, int pad_to = 0) {
  Sources s;
  s.count = static_cast<int>(lengths.size());
  s.len = std::max(pad_to, *std::max_element(lengths.begin(), lengths.end()));
  std::uniform_int_distribution<int> id(3, src_vocab - 1);
  s.ids.assign(static_cast<std::size_t>(s.count) * s.len, 0);
  for (int i = 0; i < s.count; ++i) {
    for (int t = 0; t + 1 < lengths[i]; ++t) s.ids[static_cast<std::size_t>(i) * s.len + t] = id(rng);
    s.ids[static_cast<std::size_t>(i) * s.len + lengths[i] - 1] = 1;  // eos
    s.lengths.push_back(lengths[i]);
  }
  return s;
}

// The rows of `sources` named by `pick`, padded to `pad_to` (0: their own longest length).
Sources pick_sources(const Sources& sources, const std::vector<int32_t>& pick, int pad_to = 0) {
  Sources s;
  s.count = static_cast<int>(pick.size());
  for (int32_t p : pick) s.len = std::max(s.len, sources.lengths[p]);
  s.len = std::max(s.len, pad_to);
  s.ids.assign(static_cast<std::size_t>(s.count) * s.len, 0);
  for (int i = 0; i < s.count; ++i) {
    const int p = pick[i];
    std::copy_n(sources.ids.begin() + static_cast<std::ptrdiff_t>(p) * sources.len, sources.lengths[p],
                s.ids.begin() + static_cast<std::ptrdiff_t>(i) * s.len);
    s.lengths.push_back(sources.lengths[p]);
  }
  return s;
}

// Log-probabilities of a fresh decoder that feeds histories[h] (bos first) to one hypothesis per source row, without
// any select(): result[t][h * V + v].
std::vector<std::vector<float>> decode_plainly(const EncoderDecoderModel& model, const Sources& src,
                                               const std::vector<std::vector<int32_t>>& histories) {
  const int steps = static_cast<int>(histories[0].size());
  EncoderDecoderStepModel dec(model, src.count, src.len, steps);
  dec.start(src.ids, src.lengths, src.count, src.len);
  std::vector<std::vector<float>> out(steps);
  for (int t = 0; t < steps; ++t) {
    std::vector<int32_t> tokens;
    for (const auto& h : histories) tokens.push_back(h[t]);
    dec.step(tokens, out[t]);
  }
  return out;
}

// (a) Feeding the reference targets step by step reproduces the full forward pass's log-probabilities at every
// position, and the sentence sums of log p(reference) are its negative sentence nll.
TEST(EncoderDecoderStepModel, IncrementalEqualsTeacherForcedForward) {
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.name);
    Model m(v);
    EncoderDecoderModel& model = *m.transformer;
    std::mt19937_64 rng(5);
    const data::Batch batch = test::random_batch(rng, 4, 1, 8, model.config().src_vocab);
    kernels::Workspace ws(*m.backend, model.workspace_bytes(64, 8, false), "test");
    const std::vector<float> logits = model.forward_logits(batch, ws);
    std::vector<double> sentence_nll;
    model.forward_loss(batch, ws, &sentence_nll);

    const int n = batch.size, len = batch.tgt_len;
    auto dec = make_encoder_decoder_step_model(model, n, batch.src_len, len);
    ASSERT_EQ(dec->vocab_size(), kStepVocab);
    dec->start(batch.src, batch.src_lengths, n, batch.src_len);
    ASSERT_EQ(dec->live(), n);
    std::vector<double> sum_logp(n, 0.0);
    std::vector<float> log_probs;
    for (int t = 0; t < len; ++t) {
      std::vector<int32_t> tokens(n);
      for (int s = 0; s < n; ++s) tokens[s] = batch.tgt_in[static_cast<std::size_t>(s) * len + t];
      dec->step(tokens, log_probs);
      ASSERT_EQ(log_probs.size(), static_cast<std::size_t>(n) * kStepVocab);
      for (int s = 0; s < n; ++s) {
        if (t >= batch.tgt_lengths[s]) continue;  // padding positions: the full pass masks, we fed pad ids
        const std::size_t row = static_cast<std::size_t>(s) * len + t;
        const std::vector<double> ref = log_softmax_double(logits.data() + row * kStepVocab, kStepVocab);
        const std::vector<float> reff(ref.begin(), ref.end());
        EXPECT_TRUE(
            rows_close(log_probs.data() + static_cast<std::size_t>(s) * kStepVocab, reff.data(), kStepVocab, 1e-5))
            << "sentence " << s << " position " << t;
        sum_logp[s] += log_probs[static_cast<std::size_t>(s) * kStepVocab + batch.tgt_out[row]];
      }
    }
    for (int s = 0; s < n; ++s) {
      EXPECT_GT(sentence_nll[s], 0.0);
      EXPECT_NEAR(-sum_logp[s], sentence_nll[s], 1e-4 * sentence_nll[s]) << "sentence " << s;
    }
  }
}

// (b) select() with a permutation, identity parents (whose caches stay put), duplicated parents and dropped
// hypotheses (a whole sentence finishing) continues each hypothesis exactly as a decoder that fed its history from
// scratch.
TEST(EncoderDecoderStepModel, SelectContinuesTheNamedParents) {
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.name);
    Model m(v, 31);
    const EncoderDecoderModel& model = *m.transformer;
    std::mt19937_64 rng(9);
    const Sources src = random_sources(rng, {4, 7, 2}, model.config().src_vocab);
    std::uniform_int_distribution<int> token(3, kStepVocab - 1);

    EncoderDecoderStepModel dec(model, 6, src.len, 7);
    dec.start(src.ids, src.lengths, 3, src.len);
    std::vector<std::vector<int32_t>> hist = {{2}, {2}, {2}};
    std::vector<int32_t> sentence_of = {0, 1, 2};
    std::vector<float> log_probs;
    // Each stage: a selection (parents, sentences), then one step with fresh random tokens.
    const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> stages = {
        {{0, 1, 2}, {0, 1, 2}},                     // step 0: bos only
        {{0, 0, 1, 1, 2, 2}, {0, 0, 1, 1, 2, 2}},   // expand to beam 2
        {{5, 1, 0, 4, 3, 2}, {2, 0, 0, 2, 1, 1}},   // permute
        {{0, 1, 2, 3, 4, 5}, {2, 0, 0, 2, 1, 1}},   // identity: the caches stay where they are
        {{0, 2, 2, 1, 3}, {2, 0, 0, 0, 2}},         // drop sentence 1, duplicate and reorder the rest
        {{0, 1, 2}, {2, 0, 0}},                     // identity prefix: the last two leave, the rest stay
        {{2, 0}, {0, 2}},                           // shrink and swap
    };
    for (std::size_t stage = 0; stage < stages.size(); ++stage) {
      const auto& [parents, sentences] = stages[stage];
      if (stage > 0) {
        dec.select(parents, sentences);
        std::vector<std::vector<int32_t>> next;
        for (int32_t p : parents) next.push_back(hist[p]);
        hist = next;
        sentence_of = sentences;
        for (auto& h : hist) h.push_back(token(rng));
      }
      ASSERT_EQ(dec.live(), static_cast<int>(hist.size()));
      std::vector<int32_t> tokens;
      for (const auto& h : hist) tokens.push_back(h.back());
      dec.step(tokens, log_probs);

      // From scratch: one row per live hypothesis, its sentence's source (same padding), its history.
      const auto fresh = decode_plainly(model, pick_sources(src, sentence_of, src.len), hist);
      for (std::size_t j = 0; j < hist.size(); ++j) {
        EXPECT_TRUE(
            rows_close(log_probs.data() + j * kStepVocab, fresh.back().data() + j * kStepVocab, kStepVocab, 1e-5))
            << "stage " << stage << " hypothesis " << j;
      }
    }
  }
}

// (b2) Many random reorderings: three sentences x beam 3 whose hypotheses continue random parents of their sentence
// (duplicates, any row order) and that finish at different steps, so rows are renumbered again and again while
// the self-attention history stays where it was written. Every step equals decoding each history from scratch.
TEST(EncoderDecoderStepModel, RandomReorderingsAndFinishedSentencesMatchFromScratch) {
  for (const Variant& v : {kVariants[0], kVariants[1]}) {
    SCOPED_TRACE(v.name);
    Model m(v, 37);
    const EncoderDecoderModel& model = *m.transformer;
    std::mt19937_64 rng(29);
    const Sources src = random_sources(rng, {5, 3, 7}, model.config().src_vocab);
    std::uniform_int_distribution<int> token(3, kStepVocab - 1);
    const int beam = 3, steps = 9;
    const std::vector<int> finish_at = {4, 7, steps};  // the step before which each sentence leaves

    EncoderDecoderStepModel dec(model, 3 * beam, src.len, steps);
    dec.start(src.ids, src.lengths, 3, src.len);
    std::vector<std::vector<int32_t>> hist = {{2}, {2}, {2}};
    std::vector<int32_t> sentence_of = {0, 1, 2};
    std::vector<float> log_probs;
    for (int t = 0; t < steps; ++t) {
      if (t > 0) {
        std::vector<int32_t> parents;
        for (int s = 0; s < 3; ++s) {
          if (t >= finish_at[s]) continue;
          std::vector<int32_t> own;  // the sentence's current rows
          for (std::size_t j = 0; j < sentence_of.size(); ++j)
            if (sentence_of[j] == s) own.push_back(static_cast<int32_t>(j));
          std::uniform_int_distribution<std::size_t> pick(0, own.size() - 1);
          for (int b = 0; b < beam; ++b) parents.push_back(own[pick(rng)]);
        }
        std::shuffle(parents.begin(), parents.end(), rng);
        std::vector<int32_t> sentences;
        std::vector<std::vector<int32_t>> next;
        for (int32_t p : parents) {
          sentences.push_back(sentence_of[p]);
          next.push_back(hist[p]);
          next.back().push_back(token(rng));
        }
        dec.select(parents, sentences);
        hist = next;
        sentence_of = sentences;
      }
      ASSERT_EQ(dec.live(), static_cast<int>(hist.size()));
      std::vector<int32_t> tokens;
      for (const auto& h : hist) tokens.push_back(h.back());
      dec.step(tokens, log_probs);
      const auto fresh = decode_plainly(model, pick_sources(src, sentence_of, src.len), hist);
      for (std::size_t j = 0; j < hist.size(); ++j) {
        EXPECT_TRUE(
            rows_close(log_probs.data() + j * kStepVocab, fresh.back().data() + j * kStepVocab, kStepVocab, 1e-5))
            << "step " << t << " hypothesis " << j;
      }
    }
    EXPECT_EQ(dec.live(), beam);  // only the last sentence is left
  }
}

// A second batch after a reordered one starts from clean histories: every row reads its own keys again, and the
// second batch's own reorderings work as in a fresh decoder (both origin tables were reset).
TEST(EncoderDecoderStepModel, StartAfterReorderingForgetsTheOldOrder) {
  Model m(kVariants[3], 43);
  const EncoderDecoderModel& model = *m.transformer;
  std::mt19937_64 rng(31);
  const Sources first = random_sources(rng, {4, 6}, model.config().src_vocab);
  const Sources second = random_sources(rng, {3, 5}, model.config().src_vocab);
  EncoderDecoderStepModel dec(model, 4, 6, 4);
  std::vector<float> lp;
  dec.start(first.ids, first.lengths, 2, first.len);
  dec.step({2, 2}, lp);
  dec.select({1, 0, 1, 0}, {1, 0, 1, 0});
  dec.step({5, 6, 7, 8}, lp);
  dec.select({3, 2, 1, 0}, {0, 1, 0, 1});
  dec.step({5, 6, 7, 8}, lp);
  dec.select({2, 3, 3, 0}, {0, 1, 1, 0});
  dec.step({9, 4, 3, 5}, lp);

  dec.start(second.ids, second.lengths, 2, second.len);
  std::vector<std::vector<int32_t>> hist = {{2}, {2}};
  std::vector<int32_t> sentence_of = {0, 1};
  const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> stages = {
      {{0, 1}, {0, 1}}, {{1, 0, 1, 0}, {1, 0, 1, 0}}, {{0, 2, 1, 3}, {1, 1, 0, 0}}, {{1, 0, 3, 3}, {1, 1, 0, 0}}};
  for (std::size_t stage = 0; stage < stages.size(); ++stage) {
    const auto& [parents, sentences] = stages[stage];
    if (stage > 0) {
      dec.select(parents, sentences);
      std::vector<std::vector<int32_t>> next;
      for (int32_t p : parents) next.push_back(hist[p]);
      hist = next;
      sentence_of = sentences;
      std::uniform_int_distribution<int> token(3, kStepVocab - 1);
      for (auto& h : hist) h.push_back(token(rng));
    }
    std::vector<int32_t> tokens;
    for (const auto& h : hist) tokens.push_back(h.back());
    dec.step(tokens, lp);
    const auto fresh = decode_plainly(model, pick_sources(second, sentence_of, second.len), hist);
    for (std::size_t j = 0; j < hist.size(); ++j)
      EXPECT_TRUE(rows_close(lp.data() + j * kStepVocab, fresh.back().data() + j * kStepVocab, kStepVocab, 1e-5))
          << "stage " << stage << " hypothesis " << j;
  }
}

// (c) Two sentences x beam 3 share their sentence's encoder state: each hypothesis scores as its sentence decoded
// alone with the same history, hypotheses with equal histories score equally, and the two sentences differ.
TEST(EncoderDecoderStepModel, HypothesesShareTheirSentencesEncoderState) {
  Model m(kVariants[1], 41);
  const EncoderDecoderModel& model = *m.transformer;
  std::mt19937_64 rng(13);
  const Sources src = random_sources(rng, {5, 3}, model.config().src_vocab);
  EncoderDecoderStepModel dec(model, 6, src.len, 4, 2);
  dec.start(src.ids, src.lengths, 2, src.len);
  std::vector<float> lp;
  dec.step({2, 2}, lp);
  dec.select({0, 0, 0, 1, 1, 1}, {0, 0, 0, 1, 1, 1});
  const std::vector<std::vector<int32_t>> hist = {{2, 5, 7}, {2, 5, 7}, {2, 9, 4}, {2, 5, 7}, {2, 6, 7}, {2, 6, 8}};
  for (int t = 1; t < 3; ++t) {
    std::vector<int32_t> tokens;
    for (const auto& h : hist) tokens.push_back(h[t]);
    dec.step(tokens, lp);
  }
  for (int j = 0; j < 6; ++j) {
    const int sentence = j / 3;
    const auto alone = decode_plainly(model, pick_sources(src, {sentence}), {hist[j]});
    EXPECT_TRUE(rows_close(lp.data() + static_cast<std::size_t>(j) * kStepVocab, alone.back().data(), kStepVocab, 1e-5))
        << "hypothesis " << j;
  }
  EXPECT_TRUE(rows_close(lp.data(), lp.data() + kStepVocab, kStepVocab, 1e-6));  // hypotheses 0 and 1: equal histories
  // Hypotheses 0 and 3 have equal histories but different sentences.
  EXPECT_FALSE(rows_close(lp.data(), lp.data() + 3 * kStepVocab, kStepVocab, 1e-3));
}

// (d) In a batch, each sentence scores as it does alone: neither source padding nor the other sentences leak.
TEST(EncoderDecoderStepModel, BatchedSentencesScoreAsAlone) {
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(v.name);
    Model m(v, 51);
    const EncoderDecoderModel& model = *m.transformer;
    std::mt19937_64 rng(17);
    const Sources src = random_sources(rng, {1, 6, 3, 9}, model.config().src_vocab, 11);  // extra padding too
    std::uniform_int_distribution<int> token(3, kStepVocab - 1);
    std::vector<std::vector<int32_t>> hist(4, std::vector<int32_t>{2});
    for (auto& h : hist)
      for (int t = 0; t < 5; ++t) h.push_back(token(rng));
    const auto batched = decode_plainly(model, src, hist);
    for (int s = 0; s < 4; ++s) {
      const auto alone = decode_plainly(model, pick_sources(src, {s}), {hist[s]});
      for (std::size_t t = 0; t < hist[s].size(); ++t) {
        EXPECT_TRUE(
            rows_close(batched[t].data() + static_cast<std::size_t>(s) * kStepVocab, alone[t].data(), kStepVocab, 1e-5))
            << "sentence " << s << " step " << t;
      }
    }
  }
}

template <typename F>
std::string error_or_none(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// (e) Every planned limit: reaching it works, going past it is an lseq::Error that says which limit, and the
// decoder stays usable.
TEST(EncoderDecoderStepModel, LimitsAreErrorsNotCrashes) {
  Model m(kVariants[0], 61);
  const EncoderDecoderModel& model = *m.transformer;
  std::mt19937_64 rng(19);
  const Sources src = random_sources(rng, {4, 6}, model.config().src_vocab);
  EncoderDecoderStepModel dec(model, 4, 6, 3, 2);
  EXPECT_GT(dec.state_bytes(), 0u);
  EXPECT_GT(dec.scratch_bytes(), 0u);
  std::vector<float> lp;
  EXPECT_NE(error_or_none([&] { dec.step({2, 2}, lp); }).find("before start"), std::string::npos);

  const Sources three = random_sources(rng, {2, 3, 4}, model.config().src_vocab);
  EXPECT_NE(error_or_none([&] { dec.start(three.ids, three.lengths, 3, three.len); }).find("at most 2 sentences"),
            std::string::npos);
  const Sources longer = random_sources(rng, {7}, model.config().src_vocab);
  EXPECT_NE(error_or_none([&] { dec.start(longer.ids, longer.lengths, 1, longer.len); }).find("longer than the 6"),
            std::string::npos);
  std::vector<int32_t> bad_ids = src.ids;
  bad_ids[0] = model.config().src_vocab;
  EXPECT_NE(error_or_none([&] { dec.start(bad_ids, src.lengths, 2, src.len); }).find("source vocabulary"),
            std::string::npos);

  for (int round = 0; round < 2; ++round) {  // a second start after the errors works as the first
    dec.start(src.ids, src.lengths, 2, src.len);
    dec.step({2, 2}, lp);
    EXPECT_NE(error_or_none([&] {
                dec.select({0, 0, 0, 1, 1}, {0, 0, 0, 1, 1});
              }).find("at most 4"),
              std::string::npos);
    EXPECT_EQ(dec.live(), 2);  // a refused select changes nothing
    EXPECT_NE(error_or_none([&] { dec.select({0, 1}, {1, 0}); }).find("parent belongs"), std::string::npos);
    EXPECT_NE(error_or_none([&] { dec.select({2}, {0}); }).find("parent 2"), std::string::npos);
    dec.select({0, 0, 1, 1}, {0, 0, 1, 1});
    EXPECT_NE(error_or_none([&] { dec.step({3, 4}, lp); }).find("4 live"), std::string::npos);
    dec.step({3, 4, 5, 6}, lp);
    dec.step({3, 4, 5, 6}, lp);  // the third and last planned step
    for (float x : lp) EXPECT_TRUE(std::isfinite(x));
    EXPECT_NE(error_or_none([&] { dec.step({3, 4, 5, 6}, lp); }).find("planned for"), std::string::npos);
  }
  EXPECT_THROW(EncoderDecoderStepModel(model, 0, 6, 3), Error);
  EXPECT_THROW(EncoderDecoderStepModel(model, 2, 6, 3, 3), Error);
}

// The encoder runs one layer's worth of memory at a time: its depth does not change the planned scratch, and the
// caches grow with the decoder's depth only.
TEST(EncoderDecoderStepModel, EncoderDepthDoesNotGrowTheScratch) {
  auto backend = kernels::make_cpu_backend(1);
  ModelConfig c = tiny_config(kVariants[1]);
  c.dec_depth = 1;
  c.enc_depth = 1;
  EncoderDecoderModel shallow(c, *backend);
  c.enc_depth = 6;
  EncoderDecoderModel deep(c, *backend);
  // Long sources and few steps, so that start() (the encoder) sets the scratch.
  EncoderDecoderStepModel a(shallow, 4, 16, 2), b(deep, 4, 16, 2);
  EXPECT_EQ(a.scratch_bytes(), b.scratch_bytes());
  EXPECT_EQ(a.state_bytes(), b.state_bytes());
  c.dec_depth = 3;
  EncoderDecoderModel deeper_decoder(c, *backend);
  EXPECT_GT(EncoderDecoderStepModel(deeper_decoder, 4, 16, 2).state_bytes(), b.state_bytes());
}

// Finished sentences leave the batch; with none left, steps return nothing.
TEST(EncoderDecoderStepModel, EmptySelectionLeavesNothingToScore) {
  Model m(kVariants[3], 71);
  std::mt19937_64 rng(23);
  const Sources src = random_sources(rng, {3, 2}, m.transformer->config().src_vocab);
  auto dec = make_encoder_decoder_step_model(*m.transformer, 2, 3, 4);
  dec->start(src.ids, src.lengths, 2, src.len);
  std::vector<float> lp;
  dec->step({2, 2}, lp);
  dec->select({}, {});
  EXPECT_EQ(dec->live(), 0);
  dec->step({}, lp);
  EXPECT_TRUE(lp.empty());
}

}  // namespace
}  // namespace lseq
