// Learning-rate schedules and training frequencies.
#include <gtest/gtest.h>

#include <cmath>

#include "core/train/frequency.h"
#include "core/train/lr_schedule.h"

namespace lseq {
namespace {

TEST(LrSchedule, WarmupIsLinearThenInverseSquareRootDecay) {
  LrSchedule s;
  s.base = 1e-3;
  s.warmup = 100;
  s.kind = LrSchedule::Kind::inv_sqrt;
  s.decay_start = 400;
  EXPECT_DOUBLE_EQ(s.at(1), 1e-5);
  EXPECT_DOUBLE_EQ(s.at(50), 5e-4);
  EXPECT_DOUBLE_EQ(s.at(100), 1e-3);
  EXPECT_DOUBLE_EQ(s.at(400), 1e-3);
  EXPECT_NEAR(s.at(1600), 1e-3 * std::sqrt(400.0 / 1600.0), 1e-15);
  EXPECT_LT(s.at(3000), s.at(2000));
}

TEST(LrSchedule, CosineReachesZeroAtTheEnd) {
  LrSchedule s;
  s.base = 2e-3;
  s.warmup = 10;
  s.kind = LrSchedule::Kind::cosine;
  s.total = 110;
  EXPECT_DOUBLE_EQ(s.at(10), 2e-3);
  EXPECT_NEAR(s.at(60), 1e-3, 1e-12);  // half way: half the rate
  EXPECT_NEAR(s.at(110), 0.0, 1e-15);
  EXPECT_NEAR(s.at(500), 0.0, 1e-15);
}

TEST(LrSchedule, ConstantStaysAfterWarmup) {
  LrSchedule s;
  s.base = 5e-4;
  s.warmup = 4;
  EXPECT_DOUBLE_EQ(s.at(2), 2.5e-4);
  EXPECT_DOUBLE_EQ(s.at(1000000), 5e-4);
}

TEST(Frequency, FiresWhenAMultipleIsCrossed) {
  const Frequency every_3_updates{{3, ScheduleUnit::updates}};
  int fired = 0;
  for (int64_t u = 0; u < 10; ++u) fired += every_3_updates.crossed({u, 0, 0}, {u + 1, 0, 0});
  EXPECT_EQ(fired, 3);  // at 3, 6, 9

  const Frequency every_1000_labels{{1000, ScheduleUnit::labels}};
  EXPECT_FALSE(every_1000_labels.crossed({0, 0, 400}, {1, 0, 999}));
  EXPECT_TRUE(every_1000_labels.crossed({1, 0, 999}, {2, 0, 2500}));

  const Frequency never{{0, ScheduleUnit::updates}};
  EXPECT_FALSE(never.crossed({0, 0, 0}, {100, 0, 0}));
  EXPECT_FALSE(never.reached({100, 5, 10000}));
}

TEST(Frequency, AfterEpochsCountsCompletedEpochs) {
  const Frequency after{{2, ScheduleUnit::epochs}};
  EXPECT_FALSE(after.reached({500, 1, 0}));
  EXPECT_TRUE(after.reached({501, 2, 0}));
}

// Marian's --lr-warmup in target labels and --lr-decay-inv-sqrt N B: the decay starts at B with rate 1 there.
TEST(LrSchedule, UnitsAndTheSecondDecayValue) {
  LrSchedule s;
  s.base = 1.0;
  s.warmup = 1000;
  s.warmup_unit = ScheduleUnit::labels;
  EXPECT_DOUBLE_EQ(s.at(Progress{5, 0, 250}), 0.25);
  EXPECT_DOUBLE_EQ(s.at(Progress{9, 0, 5000}), 1.0);
  LrSchedule d;
  d.base = 1.0;
  d.kind = LrSchedule::Kind::inv_sqrt;
  d.decay_start = 100;
  d.decay_from = 400;
  EXPECT_DOUBLE_EQ(d.at(400), 1.0);
  EXPECT_DOUBLE_EQ(d.at(700), std::sqrt(100.0 / 400.0));  // progress shifted: 700 - 400 + 100
}

}  // namespace
}  // namespace lseq
