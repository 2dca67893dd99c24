#pragma once
// Learning rate per update: linear warm-up, then constant, inverse-square-root decay (Marian's
// --lr-decay-inv-sqrt) or cosine decay to zero at the end of training. Warm-up and decay count in Marian's units:
// updates, target labels or epochs.
#include <cstdint>

#include "core/train/frequency.h"

namespace lseq {

struct LrSchedule {
  enum class Kind { constant, inv_sqrt, cosine };
  double base = 3e-4;          // --learn-rate
  int64_t warmup = 0;          // --lr-warmup, in warmup_unit
  ScheduleUnit warmup_unit = ScheduleUnit::updates;
  Kind kind = Kind::constant;
  int64_t decay_start = 0;     // inv_sqrt: --lr-decay-inv-sqrt N (in decay_unit): the rate falls as sqrt(N / progress)
  int64_t decay_from = 0;      // inv_sqrt: its second value B: the decay starts at B (rate 1 there), not at N; 0: N
  ScheduleUnit decay_unit = ScheduleUnit::updates;
  int64_t total = 0;           // cosine: updates at which the rate reaches 0 (from --after)

  // The rate for update number `update` (1-based: the first update is 1), counting in updates only.
  double at(int64_t update) const;
  // The rate for the update `progress.updates` (1-based), with the labels and epochs done before it.
  double at(const Progress& progress) const;
};

}  // namespace lseq
