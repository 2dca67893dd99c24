#include "core/train/loss_scaler.h"

#include "util/error.h"

namespace lseq {

LossScaler::LossScaler(bool dynamic) : dynamic_(dynamic), scale_(dynamic ? kInitialScale : 1.0) {}

bool LossScaler::update(bool overflow) {
  if (!dynamic_) return false;
  if (overflow) {
    scale_ /= 2;
    good_steps_ = 0;
    return true;
  }
  if (++good_steps_ < kGrowthInterval) return false;
  scale_ *= 2;
  good_steps_ = 0;
  return true;
}

void LossScaler::restore(double scale, int64_t good_steps) {
  if (!dynamic_) return;
  if (!(scale > 0) || good_steps < 0) {
    fail(
        "progress.yml holds loss scale {} after {} good steps; the loss scale must be positive (the checkpoint is "
        "corrupt: train with --overwrite)",
        scale, good_steps);
  }
  scale_ = scale;
  good_steps_ = good_steps;
}

}  // namespace lseq
