// progress.yml: a round trip, and a damaged file refused with one line naming the file, the field and its value.
#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "core/checkpoint/training_progress.h"
#include "util/error.h"

namespace lseq {
namespace {

TrainingProgress sample() {
  TrainingProgress p;
  p.updates = 20;
  p.epochs_done = 1;
  p.target_tokens = 4000;
  p.batches = 40;
  p.optimizer_steps = 20;
  p.batcher_epoch = 2;
  p.batcher_batch = 7;
  p.batcher_group = 4;
  p.batcher_phase = 3;
  p.stalled = 1;
  p.seconds = 12.5;
  p.best["perplexity"] = 12.5;
  p.last["perplexity"] = 13.25;
  p.vocabs = {"fnv1a64:0123456789abcdef", "fnv1a64:fedcba9876543210"};
  return p;
}

// The error for `text`, or "" when it is accepted.
std::string parse_error_of(const std::string& text) {
  try {
    TrainingProgress::from_yaml(text, "ckpt/progress.yml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// sample()'s file with one line replaced (or removed when `line` is empty).
std::string with_line(const std::string& key, const std::string& line) {
  const std::string text = sample().to_yaml();
  const std::size_t begin = text.find(key + ":");
  EXPECT_NE(begin, std::string::npos) << key;
  const std::size_t end = text.find('\n', begin);
  return text.substr(0, begin) + line + text.substr(end);
}

TEST(TrainingProgress, RoundTripKeepsEveryField) {
  const TrainingProgress p = sample();
  const TrainingProgress q = TrainingProgress::from_yaml(p.to_yaml(), "progress.yml");
  EXPECT_EQ(q.updates, 20);
  EXPECT_EQ(q.batcher_epoch, 2);
  EXPECT_EQ(q.batcher_batch, 7);
  EXPECT_EQ(q.batcher_group, 4);
  EXPECT_EQ(q.batcher_phase, 3);
  EXPECT_EQ(q.seconds, 12.5);
  EXPECT_EQ(q.best.at("perplexity"), 12.5);
  EXPECT_EQ(q.last.at("perplexity"), 13.25);
  EXPECT_EQ(q.vocabs, p.vocabs);
  EXPECT_EQ(q.loss_scale, 0.0);
}

TEST(TrainingProgress, FilesWithoutTheBatchOrderLayoutReadAsPlainShuffles) {
  // Files older than batcher-group and batcher-phase: their runs shuffled every batch on its own.
  std::string text;
  std::istringstream lines(sample().to_yaml());
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("batcher-group:", 0) != 0 && line.rfind("batcher-phase:", 0) != 0) text += line + "\n";
  }
  ASSERT_EQ(text.find("batcher-group"), std::string::npos);
  ASSERT_EQ(text.find("batcher-phase"), std::string::npos);
  const TrainingProgress q = TrainingProgress::from_yaml(text, "progress.yml");
  EXPECT_EQ(q.batcher_group, 1);
  EXPECT_EQ(q.batcher_phase, 0);
  EXPECT_EQ(q.batcher_batch, 7);
}

TEST(TrainingProgress, FilesWithoutVocabularyIdentitiesStillLoad) {
  TrainingProgress p = sample();
  p.vocabs.clear();
  const std::string text = p.to_yaml();
  EXPECT_EQ(text.find("vocabs"), std::string::npos);
  EXPECT_TRUE(TrainingProgress::from_yaml(text, "progress.yml").vocabs.empty());
}

TEST(TrainingProgress, EachDamagedFieldIsNamedWithItsValue) {
  struct Case {
    std::string key, line, expected;
  };
  const Case cases[] = {
      {"updates", "updates: -5", "field 'updates' is -5"},
      {"updates", "updates: abc", "field 'updates' is 'abc', not a whole number"},
      {"updates", "updates: 2.5", "field 'updates' is '2.5'"},
      {"updates", "", "field 'updates' is missing"},
      {"batcher-epoch", "batcher-epoch: 0", "field 'batcher-epoch' is 0, but it must be at least 1"},
      {"batcher-batch", "batcher-batch: [1, 2]", "field 'batcher-batch' is not a single value"},
      {"batcher-group", "batcher-group: 0", "field 'batcher-group' is 0, but it must be at least 1"},
      {"batcher-phase", "batcher-phase: 4", "field 'batcher-phase' is 4, but it must be below batcher-group (4)"},
      {"seconds", "seconds: .nan", "field 'seconds' is '.nan', not a finite number"},
      {"seconds", "seconds: -3", "field 'seconds' is -3"},
      {"batches", "batches: 3", "field 'updates' is 20 but only 3 batches"},
      {"optimizer-steps", "optimizer-steps: 99", "field 'optimizer-steps' is 99"},
      {"vocabs", "vocabs: [one]", "field 'vocabs' is not a list of 2 entries"},
      {"stalled", "stalled: 99999999999999999999999", "field 'stalled'"},
  };
  for (const Case& c : cases) {
    const std::string error = parse_error_of(with_line(c.key, c.line));
    EXPECT_NE(error.find("progress file 'ckpt/progress.yml' is damaged"), std::string::npos) << c.line << ": " << error;
    EXPECT_NE(error.find(c.expected), std::string::npos) << c.line << ": " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  EXPECT_NE(parse_error_of(sample().to_yaml() + "loss-scale: 0\n").find("field 'loss-scale' is 0"), std::string::npos);
  const std::string best = sample().to_yaml();
  EXPECT_NE(parse_error_of(best.substr(0, best.find("best:")) + "best: {bleu: high}\n").find("field 'best: bleu'"),
            std::string::npos);
}

TEST(TrainingProgress, GarbageIsNotEchoed) {
  std::string garbage = "\x01\x02";
  for (int i = 0; i < 200; ++i) garbage += "updates: [unclosed ";
  std::string error = parse_error_of(garbage);
  EXPECT_NE(error.find("is damaged"), std::string::npos) << error;
  EXPECT_LT(error.size(), 300u) << error;
  EXPECT_EQ(error.find('\x01'), std::string::npos);

  const std::string long_value = "updates: " + std::string(500, 'x') + "\x7f";
  error = parse_error_of(with_line("updates", long_value));
  EXPECT_NE(error.find("field 'updates' is 'xxxx"), std::string::npos) << error;
  EXPECT_LT(error.size(), 300u) << error;

  EXPECT_NE(parse_error_of("just a line of text").find("not a YAML map"), std::string::npos);
}

}  // namespace
}  // namespace lseq
