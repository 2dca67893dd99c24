// Ops of incremental decoding: the strided row gather that maintains the caches, a step's query/key/value split
// with the cache append, the fp32 log-softmax of the next-token logits, its top-k and top-k sampling's draw.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/topk_draw.h"
#include "kernels/topk_order.h"
#include "util/error.h"

namespace lseq::kernels {

using cpu::f32;

void CpuBackend::gather_rows(DType dt, const void* src, int64_t src_stride, const int32_t* index, int rows,
                             int64_t row_elems, void* dst, int64_t dst_stride, const int32_t* dst_index) {
  if (rows < 0 || row_elems < 0 || src_stride < row_elems || dst_stride < row_elems)
    fail("gather_rows: invalid shape rows={} row_elems={} src_stride={} dst_stride={}", rows, row_elems, src_stride,
         dst_stride);
  if (index)
    for (int r = 0; r < rows; ++r)
      if (index[r] < 0) fail("gather_rows: index[{}] = {} is negative", r, index[r]);
  if (dst_index)
    for (int r = 0; r < rows; ++r)
      if (dst_index[r] < 0) fail("gather_rows: dst_index[{}] = {} is negative", r, dst_index[r]);
  const std::size_t size = dtype_size(dt);
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  cpu::parallel_for(threads_, rows, row_elems, [&](int64_t r) {
    const int64_t i = index ? index[r] : r;
    const int64_t o = dst_index ? dst_index[r] : r;
    std::memcpy(d + o * dst_stride * size, s + i * src_stride * size, static_cast<std::size_t>(row_elems) * size);
  });
}

void CpuBackend::split_step_qkv(DType dt, const void* qkv, const void* bias, int rows, int heads, int head_dim,
                                void* q, void* cache, const int32_t* append_dst) {
  cpu::require_f32(dt, "split_step_qkv");
  if (rows < 0 || heads < 0 || head_dim < 0)
    fail("split_step_qkv: invalid shape rows={} heads={} head_dim={}", rows, heads, head_dim);
  const int64_t slices = static_cast<int64_t>(rows) * heads, width = 3 * static_cast<int64_t>(heads) * head_dim;
  for (int64_t e = 0; e < 2 * slices; ++e)
    if (append_dst[e] < 0) fail("split_step_qkv: append_dst[{}] = {} is negative", e, append_dst[e]);
  const float* in = f32(qkv);
  const float* pb = static_cast<const float*>(bias);
  float* pq = f32(q);
  float* pc = f32(cache);
  cpu::parallel_for(threads_, rows, width, [&](int64_t r) {
    for (int p = 0; p < 3; ++p)
      for (int h = 0; h < heads; ++h) {
        const int64_t col = (static_cast<int64_t>(p) * heads + h) * head_dim, slice = r * heads + h;
        float* dst = p == 0 ? pq + slice * head_dim
                            : pc + static_cast<int64_t>(append_dst[(p - 1) * slices + slice]) * head_dim;
        for (int d = 0; d < head_dim; ++d) dst[d] = in[r * width + col + d] + (pb ? pb[col + d] : 0.0f);
      }
  });
}

void CpuBackend::log_softmax(DType dt, const void* logits, int rows, int cols, float* out, int ld) {
  cpu::require_f32(dt, "log_softmax");
  if (rows < 0 || cols < 1) fail("log_softmax: invalid shape rows={} cols={}", rows, cols);
  const int64_t stride = row_stride("log_softmax", ld, cols);
  if (stride != cols && static_cast<const void*>(out) == logits)
    fail("log_softmax: the output may alias the logits only when their rows have no padding");
  const float* px = f32(logits);
  cpu::parallel_for(threads_, rows, cols * 2, [&](int64_t r) {
    const float* x = px + r * stride;
    float* y = out + r * cols;
    const float max = *std::max_element(x, x + cols);
    double sum_exp = 0.0;
    for (int v = 0; v < cols; ++v) sum_exp += std::exp(x[v] - max);  // fp32 exp of a value <= 0, summed in double
    const double lse = max + std::log(sum_exp);
    for (int v = 0; v < cols; ++v) y[v] = static_cast<float>(x[v] - lse);  // out may alias logits in fp32
  });
}

void CpuBackend::topk_log_softmax(DType dt, const void* logits, int rows, int cols, int k, int first_allowed_id,
                                  int eos_id, float* values, int32_t* ids, float* eos_log_prob, int ld) {
  cpu::require_f32(dt, "topk_log_softmax");
  if (rows < 0 || cols < 1) fail("topk_log_softmax: invalid shape rows={} cols={}", rows, cols);
  if (k < 1 || k > kMaxTopK) fail("topk_log_softmax: k = {} is outside [1, {}]", k, kMaxTopK);
  if (eos_id < 0 || eos_id >= cols) fail("topk_log_softmax: eos id {} is outside the {} columns", eos_id, cols);
  if (first_allowed_id < 0) fail("topk_log_softmax: first allowed id {} is negative", first_allowed_id);
  const int64_t stride = row_stride("topk_log_softmax", ld, cols);
  const float* px = f32(logits);
  cpu::parallel_for(threads_, rows, cols * 2, [&](int64_t r) {
    const float* x = px + r * stride;
    // The same arithmetic as log_softmax, so that the chosen values equal the full distribution's bit for bit.
    const float max = *std::max_element(x, x + cols);
    double sum_exp = 0.0;
    for (int v = 0; v < cols; ++v) sum_exp += std::exp(x[v] - max);
    const double lse = max + std::log(sum_exp);
    float* val = values + r * k;
    int32_t* id = ids + r * k;
    for (int i = 0; i < k; ++i) val[i] = std::numeric_limits<float>::quiet_NaN(), id[i] = kNoTopKId;
    for (int v = first_allowed_id; v < cols; ++v) topk_insert(val, id, k, static_cast<float>(x[v] - lse), v);
    for (int i = 0; i < k; ++i)
      if (id[i] == kNoTopKId) val[i] = -std::numeric_limits<float>::infinity(), id[i] = -1;
    eos_log_prob[r] = static_cast<float>(x[eos_id] - lse);
  });
}

void CpuBackend::draw_topk(const float* values, const int32_t* ids, const float* eos_log_probs, int rows, int k,
                           int32_t eos_id, double temperature, uint64_t* streams, int32_t* remaining, int32_t* tokens,
                           float* token_log_probs) {
  check_draw_topk_args(rows, k, temperature);
  int32_t kept[kMaxTopK];
  float kept_log_probs[kMaxTopK];
  for (int r = 0; r < rows; ++r) {
    tokens[r] = eos_id, token_log_probs[r] = eos_log_probs[r];
    if (remaining[r] <= 0) continue;
    const int n = topk_candidates(values + static_cast<int64_t>(r) * k, ids + static_cast<int64_t>(r) * k,
                                  eos_log_probs[r], eos_id, k, kept, kept_log_probs);
    if (n == 0) continue;
    const int chosen = draw_weighted(kept_log_probs, n, temperature, next_uniform(streams[r]));
    tokens[r] = kept[chosen], token_log_probs[r] = kept_log_probs[chosen];
    if (tokens[r] != eos_id) --remaining[r];
  }
}

}  // namespace lseq::kernels
