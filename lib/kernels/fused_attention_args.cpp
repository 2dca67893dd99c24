#include "kernels/backend.h"
#include "util/error.h"

namespace lseq::kernels {

void check_fused_attention_shape(const char* op, int batch, int heads, int q_len, int k_len, int head_dim, int ldq,
                                 int ldkv) {
  if (batch < 0 || heads < 0) fail("{}: invalid shape batch={} heads={}", op, batch, heads);
  if (!Backend::fused_attention_fits(q_len, k_len, head_dim))
    fail("{}: lengths {} x {} or head dimension {} outside the fused kernels' limits (lengths in [1, {}], head "
         "dimension in [1, {}]); check Backend::fused_attention_fits first",
         op, q_len, k_len, head_dim, Backend::kMaxFusedAttentionLen, Backend::kMaxFusedAttentionHeadDim);
  const int64_t width = static_cast<int64_t>(heads) * head_dim;
  if (ldq < width || ldkv < width)
    fail("{}: row strides ldq={} ldkv={} shorter than heads x head_dim = {}", op, ldq, ldkv, width);
}

}  // namespace lseq::kernels
