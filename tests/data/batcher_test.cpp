#include "data/batcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "data/corpus_cache.h"
#include "data_test_support.h"
#include "util/error.h"

namespace lseq::data::test {
namespace {

// The sample's training corpus encoded once (in memory) with the shared joint vocabulary.
std::shared_ptr<const EncodedCorpus> sample_corpus() {
  static std::shared_ptr<const EncodedCorpus> corpus = [] {
    CorpusOptions o;
    o.files = {sample("train.de"), sample("train.en")};
    o.use_cache = false;
    return EncodedCorpus::open_or_build(o, {&vocabs().joint, &vocabs().joint});
  }();
  return corpus;
}

BatcherOptions small_batches(int prefetch = 0) {
  BatcherOptions o;
  o.mini_batch_words = 1000;
  o.maxi_batch = 20;
  o.seed = 77;
  o.prefetch = prefetch;
  return o;
}

// All batches of the current epoch until epoch_finished().
std::vector<Batch> one_epoch(Batcher& b) {
  std::vector<Batch> batches;
  do batches.push_back(b.next());
  while (!b.epoch_finished());
  return batches;
}

std::vector<int64_t> lines_of(const std::vector<Batch>& batches) {
  std::vector<int64_t> lines;
  for (const auto& b : batches) lines.insert(lines.end(), b.line_ids.begin(), b.line_ids.end());
  return lines;
}

void expect_each_pair_once(std::vector<int64_t> lines, const EncodedCorpus& c) {
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < c.size(); ++i) expected.push_back(c.line(i));
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, expected);
}

bool same_batches(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].line_ids != b[i].line_ids || a[i].src != b[i].src || a[i].tgt_in != b[i].tgt_in) return false;
  return true;
}

TEST(Batcher, EveryPairOncePerEpochAndNoBatchOverBudget) {
  auto corpus = sample_corpus();
  for (int prefetch : {0, 3}) {
    Batcher b(corpus, small_batches(prefetch));
    for (int epoch = 1; epoch <= 2; ++epoch) {
      const auto batches = one_epoch(b);
      EXPECT_EQ(b.state().epoch, epoch);
      EXPECT_EQ(b.state().batch_in_epoch, static_cast<int64_t>(batches.size()));
      EXPECT_EQ(b.batches_in_epoch(epoch), static_cast<int64_t>(batches.size()));
      expect_each_pair_once(lines_of(batches), *corpus);
      for (const auto& batch : batches) {
        const int64_t padded = int64_t(batch.size) * std::max(batch.src_len, batch.tgt_len);
        if (batch.size > 1) {
          EXPECT_LE(padded, 1000);
        }
      }
    }
  }
}

TEST(Batcher, BatchContentsAreTheEncodedLinesWithBosEosAndPadding) {
  const auto de = read_lines(sample("train.de")), en = read_lines(sample("train.en"));
  const Vocab& v = vocabs().joint;
  Batcher b(sample_corpus(), small_batches());
  for (int k = 0; k < 20; ++k) {
    const Batch batch = b.next();
    ASSERT_EQ(batch.src.size(), std::size_t(batch.size) * batch.src_len);
    ASSERT_EQ(batch.tgt_in.size(), std::size_t(batch.size) * batch.tgt_len);
    ASSERT_EQ(batch.tgt_out.size(), batch.tgt_in.size());
    int max_src = 0, max_tgt = 0;
    for (int r = 0; r < batch.size; ++r) {
      const auto line = static_cast<std::size_t>(batch.line_ids[r]);
      auto src = v.encode(de[line]);
      auto tgt = v.encode(en[line]);
      ASSERT_EQ(batch.src_lengths[r], int(src.size()) + 1);
      ASSERT_EQ(batch.tgt_lengths[r], int(tgt.size()) + 1);
      max_src = std::max(max_src, batch.src_lengths[r]);
      max_tgt = std::max(max_tgt, batch.tgt_lengths[r]);
      src.push_back(kEosId);
      src.resize(batch.src_len, kPadId);
      std::vector<int32_t> tgt_in = {kBosId}, tgt_out = tgt;
      tgt_in.insert(tgt_in.end(), tgt.begin(), tgt.end());
      tgt_out.push_back(kEosId);
      tgt_in.resize(batch.tgt_len, kPadId);
      tgt_out.resize(batch.tgt_len, kPadId);
      auto row = [&](const std::vector<int32_t>& m, int len) {
        return std::vector<int32_t>(m.begin() + std::ptrdiff_t(r) * len, m.begin() + std::ptrdiff_t(r + 1) * len);
      };
      ASSERT_EQ(row(batch.src, batch.src_len), src);
      ASSERT_EQ(row(batch.tgt_in, batch.tgt_len), tgt_in);
      ASSERT_EQ(row(batch.tgt_out, batch.tgt_len), tgt_out);
    }
    EXPECT_EQ(batch.src_len, max_src);
    EXPECT_EQ(batch.tgt_len, max_tgt);
  }
}

double padding_ratio(Batcher& b) {
  int64_t padded = 0, real = 0;
  for (const auto& batch : one_epoch(b)) {
    padded += int64_t(batch.size) * (batch.src_len + batch.tgt_len);
    real += batch.src_tokens() + batch.tgt_tokens();
  }
  return double(padded) / double(real);
}

TEST(Batcher, MaxiBatchSortingKeepsPaddingSmall) {
  auto o = small_batches();
  o.mini_batch_words = 2000;
  o.maxi_batch = 100;
  Batcher sorted(sample_corpus(), o);
  o.sort_by_length = false;
  Batcher unsorted(sample_corpus(), o);
  const double with = padding_ratio(sorted), without = padding_ratio(unsorted);
  EXPECT_LT(with, 1.3);
  EXPECT_GT(without, 1.8);
}

TEST(Batcher, SameSeedSameBatchesOtherSeedOtherOrder) {
  auto o = small_batches();
  Batcher a(sample_corpus(), o), b(sample_corpus(), o);
  o.prefetch = 5;  // the prefetch thread must not change anything
  Batcher c(sample_corpus(), o);
  o.seed = 78;
  Batcher d(sample_corpus(), o);
  const auto ea = one_epoch(a), eb = one_epoch(b), ec = one_epoch(c), ed = one_epoch(d);
  EXPECT_TRUE(same_batches(ea, eb));
  EXPECT_TRUE(same_batches(ea, ec));
  EXPECT_FALSE(same_batches(ea, ed));
  EXPECT_NE(lines_of(ea), lines_of(ed));
  // The next epoch is ordered differently too.
  EXPECT_FALSE(same_batches(ea, one_epoch(a)));
}

TEST(Batcher, WithoutShuffleEveryEpochIsTheSame) {
  auto o = small_batches();
  o.shuffle = false;
  Batcher b(sample_corpus(), o);
  const auto first = one_epoch(b), second = one_epoch(b);
  EXPECT_TRUE(same_batches(first, second));
  // Windows follow corpus order: the first batch comes from the first window.
  const int64_t window_end = 20 * (1000 / 30) * 2;
  for (int64_t line : first[0].line_ids) EXPECT_LT(line, window_end);
}

TEST(Batcher, RestoreContinuesExactlyMidEpochAndAcrossTheEpochBoundary) {
  for (int prefetch : {0, 4}) {
    auto o = small_batches(prefetch);
    Batcher reference(sample_corpus(), o);
    std::vector<Batch> expected;
    std::vector<BatcherState> states;
    const int64_t per_epoch = reference.batches_in_epoch(1);
    for (int64_t i = 0; i < per_epoch + 15; ++i) {
      expected.push_back(reference.next());
      states.push_back(reference.state());
    }
    for (int64_t cut : {int64_t(7), per_epoch - 3, per_epoch - 1, per_epoch + 2}) {
      Batcher resumed(sample_corpus(), o);
      resumed.next();  // some unrelated progress (and a running prefetch thread) before restore
      resumed.restore(states[static_cast<std::size_t>(cut)]);
      for (int64_t i = cut + 1; i < int64_t(expected.size()); ++i) {
        const Batch got = resumed.next();
        ASSERT_EQ(got.line_ids, expected[static_cast<std::size_t>(i)].line_ids) << "cut " << cut << " batch " << i;
        ASSERT_EQ(got.src, expected[static_cast<std::size_t>(i)].src);
        ASSERT_EQ(resumed.state().epoch, states[static_cast<std::size_t>(i)].epoch);
        ASSERT_EQ(resumed.state().batch_in_epoch, states[static_cast<std::size_t>(i)].batch_in_epoch);
      }
    }
  }
}

// The global stream of one rank: `count` batches and the state after each (update_batches: what the rank's
// --optimizer-delay makes it).
std::vector<std::pair<Batch, BatcherState>> global_stream(int64_t count, int prefetch = 0, int64_t update_batches = 1) {
  BatcherOptions o = small_batches(prefetch);
  o.update_batches = update_batches;
  Batcher single(sample_corpus(), o);
  std::vector<std::pair<Batch, BatcherState>> stream;
  for (int64_t i = 0; i < count; ++i) {
    Batch b = single.next();
    stream.emplace_back(std::move(b), single.state());
  }
  return stream;
}

TEST(Batcher, RanksTakeRoundsOfTheOneRankStreamAndStayInStep) {
  // Rank r's i-th batch is global batch i * world + r of the one-rank stream (what --optimizer-delay world
  // consumes in one update), across epoch ends; every rank's state after its i-th batch is the one-rank state
  // after the round, and all ranks see the epoch end in the same round.
  // With updates of one round (update_batches = world) the one-rank stream is that of --optimizer-delay world.
  Batcher probe(sample_corpus(), small_batches());
  const int64_t per_epoch = probe.batches_in_epoch(1);
  ASSERT_GT(per_epoch, 10);
  for (int world : {2, 3})
    for (bool whole_updates : {false, true}) {
      SCOPED_TRACE(whole_updates ? "updates of a round" : "every batch shuffled on its own");
      const int64_t update_batches = whole_updates ? world : 1;
      const auto stream = global_stream(3 * per_epoch + 7, 0, update_batches);
      const int64_t rounds = static_cast<int64_t>(stream.size()) / world;
      std::vector<std::vector<bool>> epoch_ends(static_cast<std::size_t>(world));
      for (int rank = 0; rank < world; ++rank) {
        auto o = small_batches(rank % 2 ? 2 : 0);
        o.world_size = world;
        o.rank = rank;
        o.update_batches = update_batches;
        Batcher b(sample_corpus(), o);
        for (int64_t i = 0; i < rounds; ++i) {
          const Batch got = b.next();
          const auto& expected = stream[static_cast<std::size_t>(i * world + rank)].first;
          ASSERT_EQ(got.line_ids, expected.line_ids) << "world " << world << " rank " << rank << " round " << i;
          ASSERT_EQ(got.src, expected.src);
          const BatcherState after_round = stream[static_cast<std::size_t>((i + 1) * world - 1)].second;
          // Where a round ends exactly at an epoch's end the one-rank state says (e, total) as the ranks do.
          ASSERT_EQ(b.state().epoch, after_round.epoch) << "world " << world << " round " << i;
          ASSERT_EQ(b.state().batch_in_epoch, after_round.batch_in_epoch) << "world " << world << " round " << i;
          epoch_ends[static_cast<std::size_t>(rank)].push_back(b.epoch_finished());
        }
      }
      for (int rank = 1; rank < world; ++rank) EXPECT_EQ(epoch_ends[static_cast<std::size_t>(rank)], epoch_ends[0]);
      EXPECT_GE(std::count(epoch_ends[0].begin(), epoch_ends[0].end(), true), 3) << "world " << world;
    }
}

// Rounds whose batches are neighbours of one sorted window: each batch's shortest target is at least as long as
// the previous batch's longest (a window is sorted by target length, then cut in order).
double neighbouring_rounds(const std::vector<std::vector<Batch>>& rounds) {
  int neighbours = 0;
  for (const auto& round : rounds) {
    bool sorted = true;
    for (std::size_t i = 1; i < round.size(); ++i) {
      const auto& a = round[i - 1].tgt_lengths;
      const auto& b = round[i].tgt_lengths;
      sorted = sorted && *std::min_element(b.begin(), b.end()) >= *std::max_element(a.begin(), a.end());
    }
    neighbours += sorted;
  }
  return static_cast<double>(neighbours) / static_cast<double>(rounds.size());
}

// `count` rounds of `world` ranks (one batcher each, from `from` where given): rounds[i][r] is rank r's i-th batch.
std::vector<std::vector<Batch>> rounds_of(int world, int64_t update_batches, int64_t count,
                                          const BatcherState* from = nullptr) {
  std::vector<std::vector<Batch>> rounds(static_cast<std::size_t>(count));
  for (int rank = 0; rank < world; ++rank) {
    auto o = small_batches();
    o.world_size = world;
    o.rank = rank;
    o.update_batches = update_batches;
    Batcher b(sample_corpus(), o);
    if (from) b.restore(*from);
    for (auto& round : rounds) round.push_back(b.next());
  }
  return rounds;
}

TEST(Batcher, AnUpdatesBatchesAreNeighboursInLength) {
  // The ranks of a round wait for each other in the gradient exchange: with update_batches the round's batches
  // come from one run of neighbours of a sorted window, in every epoch, also where the epoch's batch count is not a
  // multiple of the round, so that rounds reach into the next epoch (the sample's count depends on the vocabulary
  // trained for the tests: some of these worlds do not divide it).
  Batcher probe(sample_corpus(), small_batches());
  const int64_t per_epoch = probe.batches_in_epoch(1);
  int reaching = 0;
  for (int world : {2, 3, 4, 5, 7}) {
    SCOPED_TRACE(world);
    reaching += per_epoch % world != 0;
    const int64_t count = (3 * per_epoch) / world;
    const double grouped = neighbouring_rounds(rounds_of(world, world, count));
    const double shuffled = neighbouring_rounds(rounds_of(world, 1, count));
    // The exceptions: runs across two sort windows (about world - 1 in a window's 20 batches) and at epoch ends.
    EXPECT_GE(grouped, 0.95 - (world - 1) / 20.0);
    EXPECT_LE(shuffled, grouped - 0.3);
  }
  EXPECT_GT(reaching, 0);
}

TEST(Batcher, ResumingWithOtherUpdatesFinishesTheEpochInItsOrder) {
  // Two ranks (updates of 2) save inside epoch 1; three ranks (updates of 3) resume: epoch 1 goes on in the saved
  // order (each pair once), and the rounds of epoch 2 are laid out for updates of 3.
  auto corpus = sample_corpus();
  Batcher probe(corpus, small_batches());
  const int64_t per_epoch = probe.batches_in_epoch(1);
  auto o = small_batches();
  o.world_size = 2;
  o.update_batches = 2;
  Batcher two(corpus, o);  // rank 0, for the state
  for (int i = 0; i < 5; ++i) two.next();
  const BatcherState saved = two.state();
  std::vector<Batch> epoch1;
  for (auto& round : rounds_of(2, 2, 5)) epoch1.insert(epoch1.end(), round.begin(), round.end());
  ASSERT_EQ(saved.batch_in_epoch, 10);
  ASSERT_EQ(saved.group, 2);

  const int64_t rounds = (2 * per_epoch) / 3;
  const auto resumed = rounds_of(3, 3, rounds, &saved);
  std::vector<std::vector<Batch>> epoch2_rounds;
  for (int64_t i = 0; i < rounds; ++i) {
    const int64_t first = 10 + 3 * i;  // global position of the round's first batch
    for (int rank = 0; rank < 3; ++rank) {
      if (first + rank < per_epoch)
        epoch1.push_back(resumed[static_cast<std::size_t>(i)][static_cast<std::size_t>(rank)]);
    }
    if (first >= per_epoch) epoch2_rounds.push_back(resumed[static_cast<std::size_t>(i)]);
  }
  expect_each_pair_once(lines_of(epoch1), *corpus);
  ASSERT_GT(epoch2_rounds.size(), 10u);
  EXPECT_GE(neighbouring_rounds(epoch2_rounds), 0.85);
}

TEST(Batcher, ResumingOnAnotherWorldSizeContinuesTheGlobalStream) {
  const auto stream = global_stream(200);
  // Two ranks take 13 rounds (26 global batches) and save; three ranks resume from that state.
  auto o = small_batches();
  o.world_size = 2;
  Batcher two(sample_corpus(), o);
  for (int i = 0; i < 13; ++i) two.next();
  const BatcherState saved = two.state();
  for (int rank = 0; rank < 3; ++rank) {
    auto o3 = small_batches(rank == 1 ? 3 : 0);
    o3.world_size = 3;
    o3.rank = rank;
    Batcher three(sample_corpus(), o3);
    three.restore(saved);
    for (int i = 0; i < 20; ++i) {
      ASSERT_EQ(three.next().line_ids, stream[static_cast<std::size_t>(26 + 3 * i + rank)].first.line_ids)
          << "rank " << rank << " round " << i;
    }
  }
}

TEST(Batcher, OneEpochOfRoundsCoversEveryPairOnce) {
  auto corpus = sample_corpus();
  Batcher probe(corpus, small_batches());
  const int64_t per_epoch = probe.batches_in_epoch(1);
  for (int world : {2, 3}) {
    // The rounds of epoch 1 end in the round that takes its last batch; batches past it belong to epoch 2.
    std::vector<int64_t> lines;
    for (int rank = 0; rank < world; ++rank) {
      auto o = small_batches();
      o.world_size = world;
      o.rank = rank;
      Batcher b(corpus, o);
      for (int64_t i = 0;; ++i) {
        const Batch got = b.next();
        if (i * world + rank < per_epoch) lines.insert(lines.end(), got.line_ids.begin(), got.line_ids.end());
        if (b.epoch_finished()) break;
      }
    }
    expect_each_pair_once(lines, *corpus);
  }
}

TEST(Batcher, RestoreOnAnotherRankContinuesThatRanksShare) {
  auto o = small_batches(3);
  o.world_size = 2;
  o.rank = 1;
  Batcher reference(sample_corpus(), o);
  std::vector<Batch> expected;
  BatcherState saved;
  for (int i = 0; i < 30; ++i) {
    expected.push_back(reference.next());
    if (i == 11) saved = reference.state();
  }
  Batcher resumed(sample_corpus(), o);
  resumed.restore(saved);
  for (int i = 12; i < 30; ++i) ASSERT_EQ(resumed.next().line_ids, expected[static_cast<std::size_t>(i)].line_ids);
}

TEST(Batcher, MiniBatchLimitsSentences) {
  auto o = small_batches();
  o.mini_batch = 7;
  Batcher b(sample_corpus(), o);
  const auto batches = one_epoch(b);
  for (const auto& batch : batches) EXPECT_LE(batch.size, 7);
  expect_each_pair_once(lines_of(batches), *sample_corpus());
}

TEST(Batcher, OverlongSentenceFormsItsOwnBatch) {
  auto o = small_batches();
  o.mini_batch_words = 20;  // shorter than many sample sentences
  Batcher b(sample_corpus(), o);
  const auto batches = one_epoch(b);
  int singles = 0;
  for (const auto& batch : batches) {
    if (batch.size == 1 && std::max(batch.src_len, batch.tgt_len) > 20) ++singles;
    if (batch.size > 1) {
      EXPECT_LE(int64_t(batch.size) * std::max(batch.src_len, batch.tgt_len), 20);
    }
  }
  EXPECT_GT(singles, 0);
  expect_each_pair_once(lines_of(batches), *sample_corpus());
}

TEST(Batcher, MonolingualBatchesHaveOnlyATargetSide) {
  CorpusOptions co;
  co.files = {sample("valid.en")};
  co.use_cache = false;
  auto corpus = EncodedCorpus::open_or_build(co, {&vocabs().joint});
  Batcher b(corpus, small_batches(2));
  const auto batches = one_epoch(b);
  expect_each_pair_once(lines_of(batches), *corpus);
  for (const auto& batch : batches) {
    EXPECT_EQ(batch.src_len, 0);
    EXPECT_TRUE(batch.src.empty());
    EXPECT_EQ(batch.tgt_in[0], kBosId);
  }
}

TEST(Batcher, ErrorsInThePrefetchThreadReachNext) {
  TempDir d;
  write_file(d.file("a"), "eins\nzwei\n");
  write_file(d.file("b"), "one\ntwo\n");
  CorpusOptions co;
  co.files = {d.file("a"), d.file("b")};
  co.use_cache = false;
  auto corpus = EncodedCorpus::open_or_build(co, {&vocabs().joint, &vocabs().joint});
  auto o = small_batches(4);
  o.world_size = 3;  // two pairs (one batch an epoch) cannot feed three ranks
  Batcher b(corpus, o);
  EXPECT_THROW(b.next(), Error);
  EXPECT_THROW(b.next(), Error);
}

TEST(Batcher, DestructionWithAFullQueueDoesNotHang) {
  for (int i = 0; i < 5; ++i) {
    Batcher b(sample_corpus(), small_batches(2));
    b.next();
  }
  SUCCEED();
}

TEST(Batcher, BadOptionsAreErrors) {
  auto o = small_batches();
  o.mini_batch_words = 0;
  EXPECT_THROW(Batcher(sample_corpus(), o), Error);
  o = small_batches();
  o.rank = 2;
  o.world_size = 2;
  EXPECT_THROW(Batcher(sample_corpus(), o), Error);
}

}  // namespace
}  // namespace lseq::data::test
