#include "core/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace lseq {

double LrSchedule::at(int64_t update) const {
  const double t = static_cast<double>(std::max<int64_t>(update, 1));
  double rate = base;
  if (warmup > 0) rate *= std::min(1.0, t / static_cast<double>(warmup));
  switch (kind) {
    case Kind::constant: break;
    case Kind::inv_sqrt:
      // Marian: after decay_start updates the rate falls as sqrt(decay_start / t).
      if (decay_start > 0 && t > decay_start) rate *= std::sqrt(static_cast<double>(decay_start) / t);
      break;
    case Kind::cosine:
      if (total > warmup) {
        const double progress = std::clamp((t - warmup) / static_cast<double>(total - warmup), 0.0, 1.0);
        if (t > warmup) rate = base * 0.5 * (1.0 + std::cos(M_PI * progress));
      }
      break;
  }
  return rate;
}

}  // namespace lseq
