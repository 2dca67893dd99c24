#include "core/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace lseq {

namespace {

double progress_in(const Progress& p, ScheduleUnit unit) {
  switch (unit) {
    case ScheduleUnit::updates: return static_cast<double>(std::max<int64_t>(p.updates, 1));
    case ScheduleUnit::labels: return static_cast<double>(p.target_tokens);
    case ScheduleUnit::epochs: return static_cast<double>(p.epochs_done);
  }
  return 0;
}

}  // namespace

double LrSchedule::at(int64_t update) const { return at(Progress{update, 0, 0}); }

double LrSchedule::at(const Progress& progress) const {
  const double t = static_cast<double>(std::max<int64_t>(progress.updates, 1));
  double rate = base;
  if (warmup > 0) rate *= std::min(1.0, progress_in(progress, warmup_unit) / static_cast<double>(warmup));
  switch (kind) {
    case Kind::constant: break;
    case Kind::inv_sqrt: {
      // Marian: past the start B (default N) the rate falls as sqrt(N / (progress - B + N)), 1 at B.
      const double n = static_cast<double>(decay_start);
      const double from = decay_from > 0 ? static_cast<double>(decay_from) : n;
      const double p = progress_in(progress, decay_unit);
      if (decay_start > 0 && p > from) rate *= std::sqrt(n / (p - from + n));
      break;
    }
    case Kind::cosine:
      if (total > warmup) {
        const double done = std::clamp((t - warmup) / static_cast<double>(total - warmup), 0.0, 1.0);
        if (t > warmup) rate = base * 0.5 * (1.0 + std::cos(M_PI * done));
      }
      break;
  }
  return rate;
}

}  // namespace lseq
