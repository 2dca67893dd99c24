#pragma once
// When periodic events (--disp-freq, --save-freq, --valid-freq) fire and when training ends (--after), given an
// amount in Marian's units as parsed by Options::get_schedule ("500u", "2e", "100Mt").
#include <cstdint>
#include <string>

#include "core/options.h"

namespace lseq {

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
