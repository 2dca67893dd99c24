#pragma once
// Learning rate per update: linear warm-up, then constant, inverse-square-root decay (Marian's
// --lr-decay-inv-sqrt) or cosine decay to zero at the end of training.
#include <cstdint>

namespace lseq {

struct LrSchedule {
  enum class Kind { constant, inv_sqrt, cosine };
  double base = 3e-4;          // --learn-rate
  int64_t warmup = 0;          // --lr-warmup (updates)
  Kind kind = Kind::constant;
  int64_t decay_start = 0;     // inv_sqrt: --lr-decay-inv-sqrt (updates)
  int64_t total = 0;           // cosine: updates at which the rate reaches 0 (from --after)

  // The rate for update number `update` (1-based: the first update is 1).
  double at(int64_t update) const;
};

}  // namespace lseq
