#pragma once
// Dynamic loss scaling for fp16 training. The loss gradient is multiplied by scale() before backward so that small
// activation gradients stay above fp16's smallest values; the optimizer divides it out again (grad_norm's
// pre_scale). An update whose gradient overflowed (non-finite norm) is skipped by the optimizer kernel; then the
// scale halves. After kGrowthInterval good updates in a row it doubles. bf16 and fp32 have fp32's exponent range
// and need no scaling: a static scaler keeps scale 1 forever.
#include <cstdint>

namespace lseq {

class LossScaler {
 public:
  // Good updates in a row before the scale doubles: rare enough that a scale just lowered by an overflow is not
  // raised straight back into it, frequent enough to recover within a few percent of a typical run.
  static constexpr int64_t kGrowthInterval = 2000;
  static constexpr double kInitialScale = 65536.0;  // 2^16: the usual fp16 start; early overflows lower it

  // dynamic: fp16. Otherwise the scale is 1 and update() never changes it.
  explicit LossScaler(bool dynamic);

  bool dynamic() const { return dynamic_; }
  double scale() const { return scale_; }
  int64_t good_steps() const { return good_steps_; }  // since the last change of the scale

  // After each update: overflow = the update was skipped because its gradient was not finite. Returns true when
  // the scale changed (halved on overflow, doubled after kGrowthInterval good updates).
  bool update(bool overflow);

  // After update(true): whether that overflow counts toward --max-nan-steps. Only when the lowered scale is below
  // 1, i.e. the gradient overflowed at a scale of 1 or less: scaling no longer explains it, training diverges.
  bool overflow_is_divergence() const { return dynamic_ && scale_ < 1.0; }

  // For progress.yml (exact resume). restore() checks nothing beyond positivity; a static scaler ignores it.
  void restore(double scale, int64_t good_steps);

 private:
  bool dynamic_;
  double scale_ = 1.0;
  int64_t good_steps_ = 0;
};

}  // namespace lseq
