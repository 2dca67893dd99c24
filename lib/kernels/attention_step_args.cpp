#include "kernels/backend.h"
#include "util/error.h"

namespace lseq::kernels {

void check_attention_step_shape(int rows, int heads, int head_dim, int k_len, int64_t slice_stride,
                                const int32_t* kv_index, const int32_t* origin, int origin_stride) {
  if (rows < 0 || heads < 0 || k_len < 0)
    fail("attention_step: invalid shape rows={} heads={} k_len={}", rows, heads, k_len);
  if (head_dim < 1 || head_dim > Backend::kMaxStepHeadDim)
    fail("attention_step: head dimension {} is outside [1, {}]; use fewer, larger heads (--transformer-heads) or "
         "extend the decoding attention kernels",
         head_dim, Backend::kMaxStepHeadDim);
  if (slice_stride < static_cast<int64_t>(k_len) * head_dim)
    fail("attention_step: slice stride {} is shorter than {} keys of {} elements", slice_stride, k_len, head_dim);
  if (origin && kv_index) fail("attention_step: kv_index and origin exclude each other; pass one of them");
  if (origin && origin_stride < k_len)
    fail("attention_step: origin stride {} is shorter than {} keys", origin_stride, k_len);
}

}  // namespace lseq::kernels
