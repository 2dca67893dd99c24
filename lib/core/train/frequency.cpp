#include "core/train/frequency.h"

namespace lseq {

namespace {
int64_t measure(const Schedule& s, const Progress& p) {
  switch (s.unit) {
    case ScheduleUnit::updates: return p.updates;
    case ScheduleUnit::epochs: return p.epochs_done;
    case ScheduleUnit::labels: return p.target_tokens;
  }
  return 0;
}
}  // namespace

bool Frequency::crossed(const Progress& before, const Progress& now) const {
  if (!enabled()) return false;
  return measure(schedule, now) / schedule.count > measure(schedule, before) / schedule.count;
}

bool Frequency::reached(const Progress& now) const {
  return enabled() && measure(schedule, now) >= schedule.count;
}

}  // namespace lseq
