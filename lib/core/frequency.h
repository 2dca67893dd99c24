#pragma once
// Marian-style amounts of training: "500u" (updates), "2e" (epochs), "100000t" (target tokens); a bare number
// means updates. Used by --disp-freq, --save-freq, --valid-freq, --after, --lr-warmup, --lr-decay-inv-sqrt.
#include <cstdint>
#include <string>

namespace lseq {

struct Progress {
  int64_t updates = 0;
  int64_t epochs_done = 0;     // completed epochs
  int64_t target_tokens = 0;   // target tokens trained on so far
};

struct Frequency {
  enum class Unit { updates, epochs, tokens };
  int64_t amount = 0;  // 0 = never / no limit
  Unit unit = Unit::updates;

  // Parses "500u", "2e", "100000t", "500"; `option` names the option in the error message.
  static Frequency parse(const std::string& text, const std::string& option);

  bool enabled() const { return amount > 0; }
  // Whether a multiple of the frequency was crossed between `before` and `now` (for periodic events).
  bool crossed(const Progress& before, const Progress& now) const;
  // Whether the limit is reached (for --after).
  bool reached(const Progress& now) const;
  std::string str() const;
};

}  // namespace lseq
