// Continuous batching (beam_search_continuous over EncoderDecoderStepModel::admit): sentences admitted into a
// running search, into sentence slots freed by others, at later cache positions, get exactly the n-best lists that
// batch-by-batch beam search gives them; a search whose caches cannot take the next sentence runs out and starts
// again; lstranslate's loop writes the same output either way.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"
#include "core/model/step_sharing.h"
#include "core/search/beam_search.h"
#include "core/search/search_types.h"
#include "core/search/stream_feed.h"
#include "core/search/translator.h"
#include "data/input_line_reader.h"
#include "data/translation_input.h"
#include "data/vocab.h"
#include "forwarding_step_model.h"
#include "kernels/cpu/cpu_backend.h"
#include "model_test_util.h"
#include "recording_backends.h"
#include "sentence_feed.h"
#include "util/error.h"

namespace lseq {
namespace {

ModelConfig continuous_config(NormPlacement norm) {
  ModelConfig c;
  c.src_vocab = c.tgt_vocab = 20;
  c.dim_emb = 16;
  c.enc_depth = c.dec_depth = 2;
  c.heads = 2;
  c.dim_ffn = 32;
  c.norm = norm;
  c.tied = TiedEmbeddings::all;
  c.max_length = 64;
  return c;
}

// The sources as lstranslate's ids input: one line of space-separated ids each.
std::string id_lines(const std::vector<std::vector<int32_t>>& sources) {
  std::ostringstream text;
  for (const auto& words : sources) {
    for (std::size_t i = 0; i < words.size(); ++i) text << (i ? " " : "") << words[i];
    text << "\n";
  }
  return text.str();
}

std::vector<int64_t> iota_lines(std::size_t n, int64_t first = 0) {
  std::vector<int64_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = first + static_cast<int64_t>(i);
  return ids;
}

// Forwards everything to `inner` and counts what continuous batching does: starts and admissions.
class CountingDecoder : public test::ForwardingStepModel {
 public:
  using ForwardingStepModel::ForwardingStepModel;
  void start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override {
    ++starts;
    started += sentences;
    live_sentences = sentences;
    inner_.start(src, src_lengths, sentences, src_len);
  }
  void admit(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override {
    ++admissions;
    admitted += sentences;
    live_sentences += sentences;
    inner_.admit(src, src_lengths, sentences, src_len);
  }
  void step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values, std::vector<int32_t>& ids,
                 std::vector<float>& eos_log_probs) override {
    ++steps;
    note_step();
    inner_.step_topk(tokens, k, values, ids, eos_log_probs);
  }

  void select(const std::vector<int32_t>& parents, const std::vector<int32_t>& sentence_of) override {
    inner_.select(parents, sentence_of);
    live_sentences = static_cast<int>(std::set<int32_t>(sentence_of.begin(), sentence_of.end()).size());
  }
  // Hypotheses and sentences a step runs (sentences as the last select() left them, plus admissions since).
  void note_step() {
    most_rows = std::max(most_rows, inner_.live());
    most_sentences = std::max(most_sentences, live_sentences);
  }

  int starts = 0, started = 0, admissions = 0, admitted = 0, steps = 0;
  int live_sentences = 0, most_rows = 0, most_sentences = 0;
};

using test::feed_of;

// The same hypotheses in the same order, with the same log-probabilities up to rounding: even on one CPU thread a
// GEMM's last bits depend on the number of rows it multiplies (a sentence decoded alone and in a batch of 37 differ
// there too), so only a slot or position mix-up, not the neighbours, may change more than the last digits.
void expect_same_lists(const NBestList& got, const NBestList& want, std::size_t sentence) {
  ASSERT_EQ(got.size(), want.size()) << "sentence " << sentence;
  for (std::size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(got[k].tokens, want[k].tokens) << "sentence " << sentence << " hypothesis " << k;
    ASSERT_EQ(got[k].word_log_probs.size(), want[k].word_log_probs.size());
    for (std::size_t i = 0; i < want[k].word_log_probs.size(); ++i) {
      const float w = want[k].word_log_probs[i];
      EXPECT_NEAR(got[k].word_log_probs[i], w, 1e-5 * (1 + std::fabs(w)))
          << "sentence " << sentence << " hypothesis " << k << " token " << i;
    }
    EXPECT_NEAR(got[k].score, want[k].score, 1e-5 * (1 + std::fabs(want[k].score)))
        << "sentence " << sentence << " hypothesis " << k;
  }
}

// Each source's n-best list from one continuous search over all of them (by line id: the source's index).
std::map<int64_t, NBestList> continuous_lists(StepModel& decoder, const std::vector<std::vector<int32_t>>& sources,
                                              const BeamSearchOptions& options) {
  std::size_t next = 0;
  std::map<int64_t, NBestList> got;
  beam_search_continuous(decoder, feed_of(sources, next), options,
                         [&](int64_t line, const NBestList& list) { got[line] = list; });
  return got;
}

struct Case {
  NormPlacement norm;
  int beam;
  double normalize;
};

// Every sentence, admitted into whatever slot and at whatever cache position, gets the list a batch of all of them
// gives it.
TEST(ContinuousSearch, AdmittedSentencesGetTheirBatchLists) {
  for (const Case c : {Case{NormPlacement::pre, 3, 0.6}, Case{NormPlacement::post, 1, 0.0},
                       Case{NormPlacement::pre, 4, 1.0}}) {
    SCOPED_TRACE("beam " + std::to_string(c.beam));
    auto backend = kernels::make_cpu_backend(1);
    EncoderDecoderModel model(continuous_config(c.norm), *backend);
    test::randomize_params(*backend, model.param_store(), 17 + c.beam, 0.5);
    std::mt19937_64 rng(29 + c.beam);
    const int max_words = 7;
    const auto sources = test::random_sources(rng, 37, max_words, 20);
    BeamSearchOptions options;
    options.beam_size = c.beam;
    options.normalize = c.normalize;
    options.max_length_factor = 2;
    const int limit = max_output_tokens(max_words, options.max_length_factor) + 1;

    EncoderDecoderStepModel whole(model, 37 * c.beam, max_words + 1, limit, 37);
    const std::vector<NBestList> want = beam_search(whole, data::make_source_batch(sources, iota_lines(37)), options);

    // Four sentences at a time, with room in the caches for one and a half of the longest outputs one after another.
    EncoderDecoderStepModel inner(model, 4 * c.beam, max_words + 1, limit + limit / 2, 4);
    CountingDecoder decoder(inner);
    std::size_t next = 0;
    std::map<int64_t, NBestList> got;
    beam_search_continuous(decoder, feed_of(sources, next), options, [&](int64_t line, const NBestList& list) {
      EXPECT_TRUE(got.emplace(line, list).second) << "line " << line << " reported twice";
    });
    ASSERT_EQ(got.size(), sources.size());
    for (std::size_t s = 0; s < sources.size(); ++s) expect_same_lists(got[static_cast<int64_t>(s)], want[s], s);
    // Admissions filled the places of finished sentences, and the caches ran out and restarted at least once.
    EXPECT_EQ(decoder.started + decoder.admitted, 37);
    EXPECT_GT(decoder.admissions, 4);
    EXPECT_GT(decoder.starts, 1);
  }
}

// With more sentence places than one batch, sentences whose beams narrowed make room for more sentences: a step
// holds more sentences than a batch, never more hypotheses than planned, and every list is still the batch's.
TEST(ContinuousSearch, NarrowedBeamsMakeRoomForMoreSentences) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(continuous_config(NormPlacement::pre), *backend);
  test::randomize_params(*backend, model.param_store(), 31, 0.5);
  // eos made likely, so that hypotheses finish at different steps and beams narrow (these random weights alone end
  // every hypothesis at its length limit, where a sentence's whole beam ends at once).
  {
    ParamStore& store = model.param_store();
    std::vector<float> host(store.size());
    backend->copy_to_host(host.data(), store.master(), host.size() * sizeof(float));
    for (const ParamInfo& p : store.table().list())
      if (p.name == "output.bias") host[p.offset + data::kEosId] += 6.0f;
    backend->copy_to_device(store.master(), host.data(), host.size() * sizeof(float));
  }
  std::mt19937_64 rng(47);
  const int max_words = 7, count = 45;
  const auto sources = test::random_sources(rng, count, max_words, 20);
  BeamSearchOptions options;
  options.beam_size = 4;
  options.normalize = 1.0;
  options.max_length_factor = 2;
  const int limit = max_output_tokens(max_words, options.max_length_factor) + 1;
  EncoderDecoderStepModel whole(model, count * options.beam_size, max_words + 1, limit, count);
  const std::vector<NBestList> want = beam_search(whole, data::make_source_batch(sources, iota_lines(count)), options);

  // Batches of 4 sentences, 16 hypotheses a step, 8 sentence places.
  const int batch = 4, rows = batch * options.beam_size;
  EncoderDecoderStepModel inner(model, rows, max_words + 1, 4 * limit, batch, nullptr, 2 * batch);
  ASSERT_EQ(inner.max_live_sentences(), 2 * batch);
  CountingDecoder decoder(inner);
  std::map<int64_t, NBestList> got = continuous_lists(decoder, sources, options);
  ASSERT_EQ(got.size(), sources.size());
  for (std::size_t s = 0; s < sources.size(); ++s) expect_same_lists(got[static_cast<int64_t>(s)], want[s], s);
  EXPECT_EQ(decoder.started + decoder.admitted, count);
  EXPECT_GT(decoder.most_sentences, batch);
  EXPECT_LE(decoder.most_sentences, 2 * batch);
  EXPECT_LE(decoder.most_rows, rows);

  // With places for one batch only, no step holds more than a batch's sentences (what decoding did before).
  EncoderDecoderStepModel one_batch(model, rows, max_words + 1, 4 * limit, batch);
  CountingDecoder narrow(one_batch);
  ASSERT_EQ(continuous_lists(narrow, sources, options).size(), sources.size());
  EXPECT_EQ(narrow.most_sentences, batch);
  EXPECT_GT(narrow.steps, decoder.steps);  // the wider search needed fewer steps for the same sentences
}

// Sources of every length a slot may have held before: what an admitted sentence reads of its slot is its own.
TEST(ContinuousSearch, SlotsReusedByShorterSourcesReadOnlyTheirOwn) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(continuous_config(NormPlacement::pre), *backend);
  test::randomize_params(*backend, model.param_store(), 5, 0.5);
  std::mt19937_64 rng(41);
  std::vector<std::vector<int32_t>> sources = test::random_sources(rng, 12, 12, 20);
  for (std::size_t s = 0; s < sources.size(); s += 2) sources[s].resize(1);  // long and one-word sources alternate
  BeamSearchOptions options;
  options.beam_size = 2;
  options.max_length_factor = 1.5;
  const int limit = max_output_tokens(12, options.max_length_factor) + 1;
  std::vector<NBestList> want;
  for (const auto& source : sources) {
    EncoderDecoderStepModel alone(model, options.beam_size, 13, limit, 1);
    want.push_back(beam_search(alone, data::make_source_batch({source}, {0}), options).at(0));
  }
  EncoderDecoderStepModel inner(model, 2 * options.beam_size, 13, 8 * limit, 2);
  CountingDecoder decoder(inner);
  std::map<int64_t, NBestList> got = continuous_lists(decoder, sources, options);
  ASSERT_EQ(got.size(), sources.size());
  for (std::size_t s = 0; s < sources.size(); ++s) expect_same_lists(got[static_cast<int64_t>(s)], want[s], s);
  EXPECT_EQ(decoder.started + decoder.admitted, 12);
  EXPECT_GE(decoder.admitted, 6);
}

using test::PaddingBackend;  // pads as on the GPU, records nothing

// Admissions of one sentence at a time are padded to a bucketed count with one-eos sentences encoded into free
// slots; the padding must neither take a slot nor write into one a live sentence reads.
TEST(ContinuousSearch, PaddedAdmissionsLeaveLiveSlotsAlone) {
  PaddingBackend backend;
  ASSERT_EQ(step_rows(1, 6), 6);  // one sentence admitted with six places free is encoded as six
  EncoderDecoderModel model(continuous_config(NormPlacement::pre), backend);
  test::randomize_params(backend, model.param_store(), 23, 0.5);
  std::mt19937_64 rng(43);
  const int max_words = 6;
  const auto sources = test::random_sources(rng, 19, max_words, 20);
  BeamSearchOptions options;
  options.beam_size = 2;
  options.max_length_factor = 2;
  const int limit = max_output_tokens(max_words, options.max_length_factor) + 1;
  EncoderDecoderStepModel whole(model, 19 * options.beam_size, max_words + 1, limit, 19);
  const std::vector<NBestList> want = beam_search(whole, data::make_source_batch(sources, iota_lines(19)), options);

  EncoderDecoderStepModel inner(model, 6 * options.beam_size, max_words + 1, 3 * limit, 6);
  CountingDecoder decoder(inner);
  std::size_t next = 0;
  const SentenceFeed all = feed_of(sources, next);
  bool first = true;  // the first chunk fills the search; then one sentence per admission
  const SentenceFeed one_at_a_time = [&](int max_sentences, const std::function<bool(int)>& fits,
                                         data::Batch& chunk) {
    const int count = first ? 2 : 1;
    first = false;
    return all(std::min(max_sentences, count), fits, chunk);
  };
  std::map<int64_t, NBestList> got;
  beam_search_continuous(decoder, one_at_a_time, options,
                         [&](int64_t line, const NBestList& list) { got[line] = list; });
  ASSERT_EQ(got.size(), sources.size());
  for (std::size_t s = 0; s < sources.size(); ++s) expect_same_lists(got[static_cast<int64_t>(s)], want[s], s);
  EXPECT_EQ(decoder.admitted, decoder.admissions);  // one sentence each
  EXPECT_GT(decoder.admissions, 8);
}

// Admitting past the sentence places, before start, or a sentence longer than planned is refused with a message.
TEST(ContinuousSearch, AdmitChecksItsLimits) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(continuous_config(NormPlacement::pre), *backend);
  test::randomize_params(*backend, model.param_store(), 7, 0.5);
  EncoderDecoderStepModel decoder(model, 4, 5, 10, 2);
  const data::Batch one = data::make_source_batch({{5, 6}}, {0});
  EXPECT_THROW(decoder.admit(one.src, one.src_lengths, 1, one.src_len), Error);  // not started
  decoder.start(one.src, one.src_lengths, 1, one.src_len);
  decoder.admit(one.src, one.src_lengths, 1, one.src_len);
  EXPECT_EQ(decoder.live(), 2);
  EXPECT_THROW(decoder.admit(one.src, one.src_lengths, 1, one.src_len), Error);  // both places taken
  const data::Batch longer = data::make_source_batch({{5, 6, 7, 8, 9}}, {0});
  decoder.select({0}, {0});  // sentence 1 leaves: its place is free again
  EXPECT_THROW(decoder.admit(longer.src, longer.src_lengths, 1, longer.src_len), Error);  // 6 > 5 tokens
  decoder.admit(one.src, one.src_lengths, 1, one.src_len);
  EXPECT_EQ(decoder.live(), 2);
}

// translate_all writes the same translations with continuous batching as batch by batch, with one decoder and with
// two (the best hypotheses' text: n-best scores may differ in their last digit, see expect_same_lists).
TEST(ContinuousSearch, TranslatorOutputIsTheSame) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(continuous_config(NormPlacement::pre), *backend);
  test::randomize_params(*backend, model.param_store(), 11, 0.5);
  std::mt19937_64 rng(43);
  std::ostringstream text;
  text << id_lines(test::random_sources(rng, 50, 9, 20));
  text << "\n5 6 7\n";  // an empty line among them still yields its line
  data::TranslationInputOptions input_options;
  input_options.mini_batch = 8;
  input_options.maxi_batch = 3;
  input_options.max_length = 9;
  input_options.vocab_size = 20;
  TranslateSettings settings;
  settings.beam.beam_size = 3;
  settings.beam.max_length_factor = 2;
  const int limit = max_output_tokens(9, settings.beam.max_length_factor) + 1;
  auto translate = [&](bool continuous, int decoders) {
    std::vector<std::unique_ptr<EncoderDecoderStepModel>> owned;
    std::vector<StepModel*> models;
    for (int d = 0; d < decoders; ++d) {
      owned.push_back(std::make_unique<EncoderDecoderStepModel>(model, 8 * 3, 10, limit, 8));
      models.push_back(owned.back().get());
    }
    std::istringstream in(text.str());
    data::InputLineReader reader(in, "input.txt");
    data::TranslationInput input(reader, {}, input_options);  // ids input
    std::ostringstream out;
    settings.continuous = continuous;
    const TranslationTotals totals = translate_all(models, input, {}, settings, out);
    EXPECT_EQ(totals.lines, 52);
    return out.str();
  };
  const std::string want = translate(false, 1);
  EXPECT_EQ(translate(true, 1), want);
  EXPECT_EQ(translate(true, 2), want);
  input_options.first_maxi_batch = 1;  // 8 lines, then windows of 24
  EXPECT_EQ(translate(true, 3), want);

}

// Extra decoders (ExtraDecoders) join a continuous translation once the windows taken hold enough batches, and the
// output stays the same; on a shorter input none is made; one that cannot be made is left out and the others go on.
TEST(ContinuousSearch, TranslatorAddsDecodersOnceTheInputIsLong) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(continuous_config(NormPlacement::pre), *backend);
  test::randomize_params(*backend, model.param_store(), 17, 0.5);
  std::mt19937_64 rng(53);
  std::ostringstream text;
  text << id_lines(test::random_sources(rng, 60, 9, 20));
  data::TranslationInputOptions input_options;
  input_options.mini_batch = 4;  // 15 batches: a first window of 1, then windows of 3
  input_options.maxi_batch = 3;
  input_options.first_maxi_batch = 1;
  input_options.max_length = 9;
  input_options.vocab_size = 20;
  TranslateSettings settings;
  settings.beam.beam_size = 2;
  settings.beam.max_length_factor = 2;
  settings.continuous = true;
  const int limit = max_output_tokens(9, settings.beam.max_length_factor) + 1;
  auto make = [&] { return std::make_unique<EncoderDecoderStepModel>(model, 4 * 2, 10, 4 * limit, 4); };
  auto translate = [&](const ExtraDecoders& extra, TranslationTotals& totals) {
    const auto first = make();
    std::vector<StepModel*> models{first.get()};
    std::istringstream in(text.str());
    data::InputLineReader reader(in, "input.txt");
    data::TranslationInput input(reader, {}, input_options);
    std::ostringstream out;
    totals = translate_all(models, input, {}, settings, out, 0, extra);
    EXPECT_EQ(totals.lines, 60);
    return out.str();
  };
  TranslationTotals totals;
  const std::string want = translate({}, totals);
  EXPECT_TRUE(totals.extra_decoder_runs.empty());

  std::atomic<int> made{0};
  ExtraDecoders extra;
  extra.count = 2;
  extra.after_batches = 4;  // the first window and the next
  extra.make = [&]() -> std::unique_ptr<StepModel> {
    ++made;
    return make();
  };
  EXPECT_EQ(translate(extra, totals), want);
  EXPECT_EQ(made, 2);
  ASSERT_EQ(totals.extra_decoder_runs.size(), 2u);
  EXPECT_GT(totals.extra_decoder_runs[0].steps + totals.extra_decoder_runs[1].steps, 0u) << "they decoded";

  made = 0;
  extra.after_batches = 16;  // more than the input holds
  EXPECT_EQ(translate(extra, totals), want);
  EXPECT_EQ(made, 0);
  EXPECT_TRUE(totals.extra_decoder_runs.empty());

  extra.after_batches = 4;
  extra.make = [&]() -> std::unique_ptr<StepModel> {
    if (++made == 1) fail("no room for a further decoder (test)");
    return make();
  };
  EXPECT_EQ(translate(extra, totals), want);
  EXPECT_EQ(made, 2);
  EXPECT_EQ(totals.extra_decoder_runs.size(), 1u);
}

// The stream feed over windows already read: one search (with caches long enough for every sentence) takes all
// three windows' sentences without starting again, every line is handed over once, and each window's end comes
// after its lines and the earlier windows' ends. (translate_all's reader runs beside the searches, so there a
// window that is not read yet when places free up may still end a search: its output is checked above.)
TEST(StreamFeed, WindowsFollowOneAnotherInOneSearchAndEndInOrder) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(continuous_config(NormPlacement::pre), *backend);
  test::randomize_params(*backend, model.param_store(), 19, 0.5);
  std::mt19937_64 rng(47);
  const auto sources = test::random_sources(rng, 30, 6, 20);
  BoundedQueue<data::InputWindow> windows(8);
  for (int w = 0; w < 3; ++w) {
    data::InputWindow window;
    window.first_line = w * 11;
    window.end_line = w * 11 + 11;  // lines w*11 .. w*11+9 decoded, w*11+10 empty
    std::vector<std::pair<int64_t, std::vector<int32_t>>> lines;
    for (int i = 0; i < 10; ++i) lines.emplace_back(w * 11 + i, sources[static_cast<std::size_t>(w * 10 + i)]);
    window.batches = data::make_source_batches(lines, 4, 0);
    window.empty_lines = {w * 11 + 10};
    ASSERT_TRUE(windows.push(std::move(window)));
  }
  windows.close();
  std::vector<int64_t> handed, ends;
  std::map<int64_t, int> times;
  StreamFeed feed(windows, [&](SearchedLines lines) {
    for (int64_t line : lines.line_ids) {
      ++times[line];
      handed.push_back(line);
    }
    if (lines.window_end >= 0) {
      for (int64_t line = lines.window_end - 11; line < lines.window_end; ++line)
        EXPECT_EQ(times[line], 1) << "line " << line << " before the end of its window";
      ends.push_back(lines.window_end);
    }
    return true;
  });
  BeamSearchOptions options;
  options.beam_size = 2;
  options.max_length_factor = 2;
  const int limit = max_output_tokens(6, options.max_length_factor) + 1;
  EncoderDecoderStepModel roomy(model, 4 * options.beam_size, 7, 40 * limit, 4);
  CountingDecoder decoder(roomy);
  const SentenceFeed next = [&](int n, const std::function<bool(int)>& fits, data::Batch& chunk) {
    return feed.next(n, fits, chunk);
  };
  beam_search_continuous(decoder, next, options, [&](int64_t line, const NBestList&) {
    EXPECT_TRUE(feed.hand_over({{line}, {NBestList{}}}));
  });
  EXPECT_EQ(decoder.starts, 1);
  EXPECT_EQ(decoder.started + decoder.admitted, 30);
  EXPECT_EQ(ends, (std::vector<int64_t>{11, 22, 33}));
  EXPECT_EQ(times.size(), 33u);
  for (const auto& [line, count] : times) EXPECT_EQ(count, 1) << "line " << line;
}

// A decoder that fails at its n-th step.
class FailingDecoder : public CountingDecoder {
 public:
  FailingDecoder(StepModel& inner, int fail_at) : CountingDecoder(inner), fail_at_(fail_at) {}
  void step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values, std::vector<int32_t>& ids,
                 std::vector<float>& eos_log_probs) override {
    if (steps + 1 == fail_at_) fail("decoder failed on purpose (test)");
    CountingDecoder::step_topk(tokens, k, values, ids, eos_log_probs);
  }

 private:
  int fail_at_;
};

// Continuous translation stops every decoder, without hanging, when one decoder fails or the output cannot be
// written, and reports that error.
TEST(ContinuousSearch, TranslatorStopsOnADecoderErrorOrAFailedWrite) {
  auto backend = kernels::make_cpu_backend(1);
  EncoderDecoderModel model(continuous_config(NormPlacement::pre), *backend);
  test::randomize_params(*backend, model.param_store(), 13, 0.5);
  std::ostringstream text;
  for (int line = 0; line < 200; ++line) text << (4 + line % 15) << " " << (5 + line % 11) << "\n";
  data::TranslationInputOptions input_options;
  input_options.mini_batch = 4;
  input_options.maxi_batch = 2;
  input_options.first_maxi_batch = 1;
  input_options.vocab_size = 20;
  TranslateSettings settings;
  settings.beam.beam_size = 2;
  settings.beam.max_length_factor = 2;
  settings.continuous = true;
  const int limit = max_output_tokens(3, settings.beam.max_length_factor) + 1;
  auto run = [&](int fail_at, bool bad_output) {
    EncoderDecoderStepModel first(model, 8, 4, 4 * limit, 4), second(model, 8, 4, 4 * limit, 4);
    FailingDecoder failing(first, fail_at);
    std::vector<StepModel*> models{&second, &failing};
    std::istringstream in(text.str());
    data::InputLineReader reader(in, "input.txt");
    data::TranslationInput input(reader, {}, input_options);
    std::ostringstream out;
    if (bad_output) out.setstate(std::ios::badbit);
    auto done = std::async(std::launch::async, [&]() -> std::string {
      try {
        translate_all(models, input, {}, settings, out);
      } catch (const Error& e) {
        return e.what();
      }
      return "no error";
    });
    if (done.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      ADD_FAILURE() << "translate_all did not return within 60 s";
      std::abort();  // the threads still hold this frame's objects
    }
    return done.get();
  };
  EXPECT_NE(run(7, false).find("decoder failed on purpose"), std::string::npos);
  EXPECT_NE(run(0, true).find("writing the output failed"), std::string::npos);
}

}  // namespace
}  // namespace lseq
