// The argument checks every backend runs before an op (declared in backend.h): shapes and strides that no kernel
// could serve are refused with a message naming the op and the numbers, on the CPU and the GPU alike.
#include <algorithm>

#include "kernels/backend.h"
#include "util/error.h"

namespace lseq::kernels {

void check_gemm_shape(const GemmArgs& g) {
  if (g.m < 0 || g.n < 0 || g.k < 0 || g.batch < 1)
    fail("gemm: invalid shape m={} n={} k={} batch={}", g.m, g.n, g.k, g.batch);
  // Row-major leading dimensions are at least the stored row length.
  const int need_a = std::max(1, g.trans_a ? g.m : g.k);
  const int need_b = std::max(1, g.trans_b ? g.k : g.n);
  const int need_c = std::max(1, g.n);
  if (g.lda < need_a || g.ldb < need_b || g.ldc < need_c)
    fail("gemm: leading dimensions lda={} ldb={} ldc={} are smaller than the rows they describe ({}, {}, {})", g.lda,
         g.ldb, g.ldc, need_a, need_b, need_c);
}

void check_linear_bias_shape(int rows, int k, int n) {
  if (rows < 0 || k < 1 || n < 0)
    fail("linear_bias_forward: invalid shape rows={} k={} n={} (k >= 1, the others >= 0)", rows, k, n);
}

void check_draw_topk_args(int rows, int k, double temperature) {
  if (rows < 0 || k < 1 || k > kMaxTopK)
    fail("draw_topk: invalid shape rows={} k={} (rows >= 0, 1 <= k <= {})", rows, k, kMaxTopK);
  if (!(temperature > 0)) fail("draw_topk: the temperature must be > 0, got {}", temperature);
}

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

void check_fused_attention_dropout(const char* op, int q_len, int k_len, const Dropout& drop) {
  if (drop.p > 0.0f && !Backend::fused_attention_drops(q_len, k_len))
    fail("internal error: {} with dropout at lengths {} x {} (Backend::fused_attention_drops)", op, q_len, k_len);
}

int row_stride(const char* op, int ld, int row) {
  if (ld == 0) return row;
  if (ld < row) fail("{}: row stride {} is shorter than the row ({})", op, ld, row);
  return ld;
}

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
