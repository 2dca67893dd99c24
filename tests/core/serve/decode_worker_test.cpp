// The decoding thread over a toy StepModel: requests of mixed sizes and searches, pooled into batches, get what
// lstranslate writes for the same lines with the same options; a batch that fails answers its sentences with the
// error and the thread goes on.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/search/beam_search.h"
#include "core/search/toy_step_model.h"
#include "core/search/translator.h"
#include "core/serve/decode_worker.h"
#include "core/serve/translate_response.h"
#include "data/input_line_reader.h"
#include "data/translation_input.h"

namespace lseq::serve {
namespace {

constexpr int kVocab = 40;

std::vector<std::vector<int32_t>> random_sentences(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> out(count);
  for (auto& s : out) {
    const int length = 1 + static_cast<int>(rng() % 9);
    for (int i = 0; i < length; ++i) s.push_back(4 + static_cast<int32_t>(rng() % (kVocab - 4)));
  }
  return out;
}

// lstranslate's output for these sentences as its input lines (token ids, no SentencePiece), one string per line.
std::vector<std::string> lstranslate(const std::vector<std::vector<int32_t>>& sentences,
                                     const TranslateSettings& settings) {
  std::string text;
  for (const auto& s : sentences) text += ids_to_text(s) + "\n";
  std::istringstream in(text);
  data::InputLineReader reader(in, "input");
  data::TranslationInputOptions options;
  options.mini_batch = 3;
  options.vocab_size = kVocab;
  data::TranslationInput input(reader, nullptr, options);
  testing::ToyStepModel model(kVocab, 11, -1.0);
  std::ostringstream out;
  translate_all(model, input, nullptr, settings, out);
  std::vector<std::string> lines;
  std::istringstream written(out.str());
  std::string line;
  while (std::getline(written, line)) lines.push_back(line);
  return lines;
}

// Batch by batch and continuously (waiting sentences joining running searches).
TEST(DecodeWorker, PooledRequestsGetWhatLstranslateWrites) {
  for (bool continuous : {false, true}) {
  SCOPED_TRACE(continuous ? "continuous" : "batch by batch");
  testing::ToyStepModel model(kVocab, 11, -1.0);
  model.allow_admission(5);
  SchedulerOptions options;
  options.limits.max_sentences = 5;
  options.limits.max_tokens = 30;
  options.max_wait = std::chrono::milliseconds(1);
  Scheduler scheduler(options);
  ServeMetrics metrics(5);
  DecodeWorker worker(model, scheduler, metrics, continuous);

  std::vector<TranslateSettings> searches(4);
  searches[1].beam.beam_size = 1;
  searches[2].beam.beam_size = 3;
  searches[2].word_scores = true;
  searches[3].sample = true;
  searches[3].sampling.seed = 5;
  struct Sent {
    std::vector<std::vector<int32_t>> sentences;
    TranslateSettings settings;
    std::shared_ptr<PendingRequest> request;
  };
  std::vector<Sent> requests;
  for (int r = 0; r < 12; ++r) {
    Sent s;
    s.sentences = random_sentences(1 + r % 6, 100 + static_cast<uint64_t>(r));
    s.settings = searches[static_cast<size_t>(r) % searches.size()];
    s.request = std::make_shared<PendingRequest>(static_cast<int>(s.sentences.size()), s.settings, Clock::now());
    std::vector<SentenceToDecode> to_decode;
    for (size_t i = 0; i < s.sentences.size(); ++i) to_decode.push_back({static_cast<int>(i), s.sentences[i]});
    ASSERT_EQ(scheduler.submit(s.request, std::move(to_decode)), Scheduler::Admission::accepted);
    requests.push_back(std::move(s));
  }
  worker.start();
  for (Sent& s : requests) {
    ASSERT_EQ(s.request->wait(Clock::now() + std::chrono::seconds(60), nullptr, std::chrono::milliseconds(10)),
              PendingRequest::Outcome::done);
    const nlohmann::json answer =
        nlohmann::json::parse(render_translations(s.request->take(), s.settings, nullptr, "", ""));
    EXPECT_EQ(answer["translations"].get<std::vector<std::string>>(), lstranslate(s.sentences, s.settings));
  }
  scheduler.close();
  worker.join();
  const std::string text = metrics.render(ServeGauges{}, Clock::now());
  EXPECT_NE(text.find("lsserve_batches_total "), std::string::npos);
  EXPECT_EQ(text.find("lsserve_batches_total 0\n"), std::string::npos) << text;
  if (continuous)
    EXPECT_GT(model.admissions, 0);
  else
    EXPECT_EQ(model.admissions, 0);
  }
}

// A model that fails on any batch holding token 9.
class FailingModel : public testing::ToyStepModel {
 public:
  FailingModel() : ToyStepModel(kVocab, 3) {}
  void start(const std::vector<int32_t>& src, const std::vector<int32_t>& lengths, int sentences, int len) override {
    for (int32_t id : src)
      if (id == 9) throw std::runtime_error("device on fire");
    ToyStepModel::start(src, lengths, sentences, len);
  }
  void admit(const std::vector<int32_t>& src, const std::vector<int32_t>& lengths, int sentences, int len) override {
    for (int32_t id : src)
      if (id == 9) throw std::runtime_error("device on fire");
    ToyStepModel::admit(src, lengths, sentences, len);
  }
};

TEST(DecodeWorker, AFailedBatchAnswersItsSentencesWithTheErrorAndGoesOn) {
  FailingModel model;
  SchedulerOptions options;
  Scheduler scheduler(options);
  ServeMetrics metrics(64);
  DecodeWorker worker(model, scheduler, metrics);
  auto bad = std::make_shared<PendingRequest>(2, TranslateSettings{}, Clock::now());
  ASSERT_EQ(scheduler.submit(bad, {{0, {5, 9}}, {1, {6}}}), Scheduler::Admission::accepted);
  ScheduledBatch batch;
  ASSERT_TRUE(scheduler.take(Clock::now(), batch));
  worker.decode(batch);
  auto entries = bad->take();
  ASSERT_EQ(entries.size(), 2u);
  for (const auto& e : entries) EXPECT_NE(e.error.find("decoding failed: device on fire"), std::string::npos);

  auto good = std::make_shared<PendingRequest>(1, TranslateSettings{}, Clock::now());
  ASSERT_EQ(scheduler.submit(good, {{0, {5, 6}}}), Scheduler::Admission::accepted);
  ASSERT_TRUE(scheduler.take(Clock::now(), batch));
  worker.decode(batch);
  entries = good->take();
  EXPECT_TRUE(entries[0].done);
  EXPECT_TRUE(entries[0].error.empty());
  EXPECT_FALSE(entries[0].list.empty());
}

// A continuous search that fails answers every sentence it holds with the error, those that joined it too.
TEST(DecodeWorker, AFailedContinuousSearchAnswersAllItsSentences) {
  FailingModel model;
  model.allow_admission(4);
  SchedulerOptions options;
  Scheduler scheduler(options);
  ServeMetrics metrics(64);
  DecodeWorker worker(model, scheduler, metrics);
  auto first = std::make_shared<PendingRequest>(1, TranslateSettings{}, Clock::now());
  auto bad = std::make_shared<PendingRequest>(1, TranslateSettings{}, Clock::now());
  ASSERT_EQ(scheduler.submit(first, {{0, std::vector<int32_t>(12, 5)}}), Scheduler::Admission::accepted);
  ScheduledBatch batch;
  ASSERT_TRUE(scheduler.take(Clock::now(), batch));
  ASSERT_EQ(scheduler.submit(bad, {{0, {9, 6}}}), Scheduler::Admission::accepted);
  worker.decode_continuously(batch);
  EXPECT_EQ(model.admissions, 0);
  for (const auto& request : {first, bad}) {
    const auto entries = request->take();
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_NE(entries[0].error.find("decoding failed: device on fire"), std::string::npos) << entries[0].error;
  }
  EXPECT_EQ(scheduler.waiting(), 0);
}

// Watches one request at every step of the search: whether all its sentences were answered by then.
class WatchingModel : public testing::ToyStepModel {
 public:
  explicit WatchingModel(std::shared_ptr<PendingRequest> watched)
      : ToyStepModel(kVocab, 7, /*eos_bias=*/-40.0), watched_(std::move(watched)) {}
  void step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values, std::vector<int32_t>& ids,
                 std::vector<float>& eos_log_probs) override {
    answered_at_step.push_back(watched_->progress().all_done);
    ToyStepModel::step_topk(tokens, k, values, ids, eos_log_probs);
  }
  std::vector<bool> answered_at_step;

 private:
  std::shared_ptr<PendingRequest> watched_;
};

// A request whose one-word sentence shares a batch with a 30-word one is answered at the step its sentence ends (the
// outputs run to their length limits: 3 and 90 tokens), not when the batch does.
TEST(DecodeWorker, ARequestIsAnsweredWhenItsSentencesEndNotWhenItsBatchDoes) {
  SchedulerOptions options;
  Scheduler scheduler(options);
  ServeMetrics metrics(64);
  auto short_request = std::make_shared<PendingRequest>(1, TranslateSettings{}, Clock::now());
  auto long_request = std::make_shared<PendingRequest>(1, TranslateSettings{}, Clock::now());
  std::vector<int32_t> long_sentence(30, 5);
  ASSERT_EQ(scheduler.submit(short_request, {{0, {6}}}), Scheduler::Admission::accepted);
  ASSERT_EQ(scheduler.submit(long_request, {{0, long_sentence}}), Scheduler::Admission::accepted);
  ScheduledBatch batch;
  ASSERT_TRUE(scheduler.take(Clock::now(), batch));
  ASSERT_EQ(batch.batch.size, 2) << "the test needs both sentences in one batch";
  WatchingModel model(short_request);
  DecodeWorker worker(model, scheduler, metrics);
  worker.decode(batch);
  const std::vector<bool>& answered = model.answered_at_step;
  ASSERT_EQ(answered.size(), 91u);  // 90 tokens, then eos
  // Answered after the short output's eos (step 4) and before the steps of the long one that follow.
  EXPECT_FALSE(answered[3]);
  EXPECT_TRUE(answered[4]);
  EXPECT_TRUE(answered.back());
  EXPECT_TRUE(long_request->progress().all_done);
  const auto entries = short_request->take();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(entries[0].error.empty());
  EXPECT_EQ(entries[0].list.front().tokens.size(), 3u);
}

// Submits a request when the search reaches a given step, and watches it at every step.
class JoiningModel : public testing::ToyStepModel {
 public:
  JoiningModel(Scheduler& scheduler, std::shared_ptr<PendingRequest> joining, int submit_at)
      : ToyStepModel(kVocab, 7, /*eos_bias=*/-40.0), scheduler_(scheduler), joining_(std::move(joining)),
        submit_at_(submit_at) {
    allow_admission(4);
  }
  void step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values, std::vector<int32_t>& ids,
                 std::vector<float>& eos_log_probs) override {
    answered_at_step.push_back(joining_->progress().all_done);
    if (steps == submit_at_) EXPECT_EQ(scheduler_.submit(joining_, {{0, {6}}}), Scheduler::Admission::accepted);
    ToyStepModel::step_topk(tokens, k, values, ids, eos_log_probs);
  }
  std::vector<bool> answered_at_step;

 private:
  Scheduler& scheduler_;
  std::shared_ptr<PendingRequest> joining_;
  int submit_at_;
};

// A request that arrives while a search runs a 30-word sentence (90 output tokens) joins that search and is answered
// a few steps later, with what a batch of its own gives it, not after the long output ends.
TEST(DecodeWorker, ARequestArrivingDuringASearchJoinsIt) {
  SchedulerOptions options;
  Scheduler scheduler(options);
  ServeMetrics metrics(64);
  auto long_request = std::make_shared<PendingRequest>(1, TranslateSettings{}, Clock::now());
  auto joining = std::make_shared<PendingRequest>(1, TranslateSettings{}, Clock::now());
  ASSERT_EQ(scheduler.submit(long_request, {{0, std::vector<int32_t>(30, 5)}}), Scheduler::Admission::accepted);
  ScheduledBatch batch;
  ASSERT_TRUE(scheduler.take(Clock::now(), batch));
  JoiningModel model(scheduler, joining, 10);
  DecodeWorker worker(model, scheduler, metrics);
  worker.decode_continuously(batch);
  ASSERT_EQ(model.answered_at_step.size(), 91u);  // the long output's 90 tokens, then eos
  EXPECT_EQ(model.starts, 1);
  EXPECT_EQ(model.admissions, 1);
  // Joined after step 10, three tokens and eos: answered from step 15 on, long before step 91.
  EXPECT_FALSE(model.answered_at_step[14]);
  EXPECT_TRUE(model.answered_at_step[15]);
  EXPECT_TRUE(long_request->progress().all_done);
  const auto entries = joining->take();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(entries[0].error.empty());
  testing::ToyStepModel alone(kVocab, 7, -40.0);
  const auto want = beam_search(alone, data::make_source_batch({{6}}, {0}), TranslateSettings{}.beam);
  EXPECT_EQ(entries[0].list.front().tokens, want[0].front().tokens);
  EXPECT_EQ(entries[0].list.front().score, want[0].front().score);
  EXPECT_EQ(scheduler.waiting(), 0);
}

}  // namespace
}  // namespace lseq::serve
