#include "kernels/backend.h"
#include "util/error.h"

namespace lseq::kernels {

void check_fused_attention_shape(const char* op, int batch, int heads, int lq, int lk, int k_len, int head_dim) {
  if (batch < 0 || heads < 0 || k_len < 0 || k_len > lk)
    fail("{}: invalid shape batch={} heads={} lk={} k_len={}", op, batch, heads, lk, k_len);
  if (!Backend::fused_attention_fits(lq, lk, head_dim))
    fail("{}: padded lengths {} x {} or head dimension {} outside the fused kernels' limits (lengths in [1, {}], head "
         "dimension in [1, {}]); check Backend::fused_attention_fits first",
         op, lq, lk, head_dim, Backend::kMaxFusedAttentionLen, Backend::kMaxFusedAttentionHeadDim);
}

}  // namespace lseq::kernels
