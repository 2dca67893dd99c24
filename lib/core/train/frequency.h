#pragma once
// When periodic events (--disp-freq, --save-freq, --valid-freq) fire and when training ends (--after), given an
// amount in Marian's units as parsed by parse_schedule (core/cli/options.h) ("500u", "2e", "100Mt").
#include <cstdint>

namespace lseq {

// A count in training units, as Marian writes them: "5000u" (updates), "10e" (epochs), "2Mt" (target labels);
// K, M, G multiply by 10^3, 10^6, 10^9; a bare number counts updates. 0 means "never" / "no limit".
enum class ScheduleUnit { updates, epochs, labels };
struct Schedule {
  int64_t count = 0;
  ScheduleUnit unit = ScheduleUnit::updates;
};

struct Progress {
  int64_t updates = 0;
  int64_t epochs_done = 0;     // completed epochs
  int64_t target_tokens = 0;   // target tokens (labels) trained on so far
};

struct Frequency {
  Schedule schedule;  // count 0 = never / no limit

  bool enabled() const { return schedule.count > 0; }
  // Whether a multiple of the frequency was crossed between `before` and `now` (periodic events).
  bool crossed(const Progress& before, const Progress& now) const;
  // Whether the limit is reached (--after).
  bool reached(const Progress& now) const;
};

}  // namespace lseq
