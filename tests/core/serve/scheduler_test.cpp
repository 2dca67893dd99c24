// lsserve's scheduler: pooling across requests, batches cut by length within the limits, settings never mixed,
// the bounded queue, the maximum wait, cancellation and closing.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <thread>

#include "core/serve/scheduler.h"

namespace lseq::serve {
namespace {

using std::chrono::milliseconds;

std::shared_ptr<PendingRequest> request_of(int sentences, Clock::time_point arrival, int beam = 4) {
  TranslateSettings settings;
  settings.beam.beam_size = beam;
  return std::make_shared<PendingRequest>(sentences, settings, arrival);
}

// Sentences of the given lengths (without eos), ids 4, 5, 6, ...
std::vector<SentenceToDecode> sentences_of(const std::vector<int>& lengths) {
  std::vector<SentenceToDecode> out;
  for (size_t i = 0; i < lengths.size(); ++i) {
    SentenceToDecode s;
    s.index = static_cast<int>(i);
    for (int t = 0; t < lengths[i]; ++t) s.ids.push_back(4 + t);
    out.push_back(s);
  }
  return out;
}

SchedulerOptions options(int max_sentences, int64_t max_tokens, double fixed_cost, int max_queue = 1000,
                         Clock::duration max_wait = std::chrono::seconds(100)) {
  SchedulerOptions o;
  o.limits.max_sentences = max_sentences;
  o.limits.max_tokens = max_tokens;
  o.limits.fixed_cost = fixed_cost;
  o.max_queue = max_queue;
  o.max_wait = max_wait;
  return o;
}

TEST(Scheduler, PoolsSentencesOfSeveralRequestsIntoOneBatch) {
  Scheduler scheduler(options(64, 0, 16));
  const auto now = Clock::now();
  auto a = request_of(2, now), b = request_of(3, now);
  ASSERT_EQ(scheduler.submit(a, sentences_of({3, 5})), Scheduler::Admission::accepted);
  ASSERT_EQ(scheduler.submit(b, sentences_of({4, 1, 5})), Scheduler::Admission::accepted);
  EXPECT_EQ(scheduler.waiting(), 5);
  EXPECT_EQ(scheduler.waiting_requests(), 2);
  ScheduledBatch batch;
  ASSERT_TRUE(scheduler.take(now, batch));
  EXPECT_EQ(batch.batch.size, 5);
  EXPECT_EQ(batch.batch.src_len, 6);  // the longest (5) + eos
  // Longest first, as lstranslate orders a batch; line_ids are the sentences' indices in their requests.
  for (int i = 1; i < batch.batch.size; ++i) EXPECT_GE(batch.batch.src_lengths[i - 1], batch.batch.src_lengths[i]);
  std::multiset<std::pair<const PendingRequest*, int64_t>> owners;
  for (int i = 0; i < batch.batch.size; ++i) {
    owners.insert({batch.requests[i].get(), batch.batch.line_ids[i]});
    const int length = batch.batch.src_lengths[i];
    EXPECT_EQ(batch.batch.src[static_cast<size_t>(i) * batch.batch.src_len + length - 1], 3) << "eos";
  }
  EXPECT_EQ(owners, (std::multiset<std::pair<const PendingRequest*, int64_t>>{
                        {a.get(), 0}, {a.get(), 1}, {b.get(), 0}, {b.get(), 1}, {b.get(), 2}}));
  EXPECT_EQ(scheduler.waiting(), 0);
  EXPECT_EQ(scheduler.waiting_requests(), 0);
  EXPECT_FALSE(scheduler.take(now, batch));
}

TEST(Scheduler, NeverMixesSearchSettings) {
  Scheduler scheduler(options(64, 0, 1000));
  const auto now = Clock::now();
  ASSERT_EQ(scheduler.submit(request_of(2, now, 4), sentences_of({3, 3})), Scheduler::Admission::accepted);
  ASSERT_EQ(scheduler.submit(request_of(2, now, 1), sentences_of({3, 3})), Scheduler::Admission::accepted);
  ASSERT_EQ(scheduler.submit(request_of(1, now, 4), sentences_of({3})), Scheduler::Admission::accepted);
  std::vector<int> sizes;
  ScheduledBatch batch;
  while (scheduler.take(now, batch)) {
    for (const auto& r : batch.requests) EXPECT_EQ(r->settings().beam.beam_size, batch.settings.beam.beam_size);
    sizes.push_back(batch.batch.size);
  }
  std::sort(sizes.begin(), sizes.end());
  EXPECT_EQ(sizes, (std::vector<int>{2, 3}));
}

TEST(Scheduler, BatchesRespectTheSentenceLimitAndTokenBudget) {
  Scheduler scheduler(options(4, 40, 1000));
  const auto now = Clock::now();
  std::vector<int> lengths;
  for (int i = 0; i < 30; ++i) lengths.push_back(1 + i % 13);
  ASSERT_EQ(scheduler.submit(request_of(30, now), sentences_of(lengths)), Scheduler::Admission::accepted);
  int total = 0;
  ScheduledBatch batch;
  while (scheduler.take(now, batch)) {
    EXPECT_LE(batch.batch.size, 4);
    if (batch.batch.size > 1) EXPECT_LE(batch.batch.size * batch.batch.src_len, 40);
    total += batch.batch.size;
  }
  EXPECT_EQ(total, 30);
}

TEST(Scheduler, QueueIsBoundedAndTakesRequestsWhole) {
  Scheduler scheduler(options(64, 0, 16, 5));
  const auto now = Clock::now();
  EXPECT_EQ(scheduler.submit(request_of(3, now), sentences_of({2, 2, 2})), Scheduler::Admission::accepted);
  EXPECT_EQ(scheduler.submit(request_of(3, now), sentences_of({2, 2, 2})), Scheduler::Admission::queue_full);
  EXPECT_EQ(scheduler.waiting(), 3) << "a refused request leaves nothing behind";
  EXPECT_EQ(scheduler.submit(request_of(2, now), sentences_of({2, 2})), Scheduler::Admission::accepted);
  EXPECT_EQ(scheduler.submit(request_of(6, now), sentences_of({1, 1, 1, 1, 1, 1})), Scheduler::Admission::queue_full);
}

// Long sentences make the most efficient batch; a short old one waits for company only until max_wait.
TEST(Scheduler, AnOldSentenceGoesFirstAfterMaxWait) {
  const auto start = Clock::now();
  for (const bool overdue : {false, true}) {
    Scheduler scheduler(options(8, 0, 4, 1000, milliseconds(50)));
    auto old = request_of(1, start);
    ASSERT_EQ(scheduler.submit(old, sentences_of({2})), Scheduler::Admission::accepted);
    auto crowd = request_of(8, start + milliseconds(10));
    ASSERT_EQ(scheduler.submit(crowd, sentences_of({40, 40, 40, 40, 40, 40, 40, 40})), Scheduler::Admission::accepted);
    ScheduledBatch batch;
    ASSERT_TRUE(scheduler.take(start + milliseconds(overdue ? 60 : 20), batch));
    const bool has_old = std::any_of(batch.requests.begin(), batch.requests.end(),
                                     [&](const auto& r) { return r.get() == old.get(); });
    EXPECT_EQ(has_old, overdue) << (overdue ? "past max_wait the oldest goes first" : "the full batch goes first");
    EXPECT_EQ(batch.oldest_arrival, overdue ? start : start + milliseconds(10));
  }
}

TEST(Scheduler, CancelRemovesARequestsWaitingSentences) {
  Scheduler scheduler(options(64, 0, 16));
  const auto now = Clock::now();
  auto keep = request_of(2, now), drop = request_of(3, now);
  scheduler.submit(keep, sentences_of({2, 3}));
  scheduler.submit(drop, sentences_of({2, 3, 4}));
  EXPECT_EQ(scheduler.cancel(*drop), 3);
  EXPECT_EQ(scheduler.cancel(*drop), 0);
  EXPECT_EQ(scheduler.waiting(), 2);
  ScheduledBatch batch;
  ASSERT_TRUE(scheduler.take(now, batch));
  for (const auto& r : batch.requests) EXPECT_EQ(r.get(), keep.get());
  EXPECT_EQ(drop.use_count(), 1) << "the scheduler holds no reference to a cancelled request";
}

TEST(Scheduler, NextWaitsForWorkAndEndsAfterCloseOnceEmpty) {
  Scheduler scheduler(options(64, 0, 16));
  std::vector<int> sizes;
  std::thread worker([&] {
    ScheduledBatch batch;
    while (scheduler.next(batch)) sizes.push_back(batch.batch.size);
  });
  std::this_thread::sleep_for(milliseconds(20));
  ASSERT_EQ(scheduler.submit(request_of(2, Clock::now()), sentences_of({2, 2})), Scheduler::Admission::accepted);
  std::this_thread::sleep_for(milliseconds(20));
  scheduler.close();
  worker.join();
  EXPECT_EQ(sizes, std::vector<int>{2});
  EXPECT_EQ(scheduler.submit(request_of(1, Clock::now()), sentences_of({2})), Scheduler::Admission::closed);
}

TEST(Scheduler, SameSearchIgnoresOnlyHowResultsAreWritten) {
  TranslateSettings a, b;
  b.n_best = true;
  b.word_scores = true;
  EXPECT_TRUE(same_search(a, b));
  b.beam.normalize = 1;
  EXPECT_FALSE(same_search(a, b));
  TranslateSettings s1 = a, s2 = a;
  s1.sample = s2.sample = true;
  EXPECT_TRUE(same_search(s1, s2));
  s2.sampling.seed = 99;
  EXPECT_FALSE(same_search(s1, s2));
  EXPECT_FALSE(same_search(a, s1));
  // A language model's requests that ask for other numbers of new tokens are other searches.
  TranslateSettings lm = a;
  lm.beam.max_new_tokens = 5;
  EXPECT_FALSE(same_search(a, lm));
  TranslateSettings lm_sampled = s1;
  lm_sampled.sampling.max_new_tokens = 5;
  EXPECT_FALSE(same_search(s1, lm_sampled));
}

}  // namespace
}  // namespace lseq::serve
