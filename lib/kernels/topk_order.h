#pragma once
// The order of decoding's top-k (Backend::topk_log_softmax, StepModel::step_topk), shared by the CPU and CUDA
// backends so that both choose the same tokens: the larger log-probability first, on equal values the lower id,
// and NaN after every number (search never chooses NaN). An empty slot is (NaN, kNoTopKId): worse than anything.
#include <cstdint>

#include "util/host_device.h"

namespace lseq::kernels {

constexpr int kMaxTopK = 128;                // the largest k topk_log_softmax accepts (top-k sampling's 50, 100)
constexpr int32_t kNoTopKId = 0x7fffffff;    // id of a slot not filled (reported as id -1, value -inf)

LSEQ_HOST_DEVICE bool topk_better(float va, int32_t ia, float vb, int32_t ib) {
  const bool nan_a = va != va, nan_b = vb != vb;
  if (nan_a != nan_b) return nan_b;
  if (!nan_a && va != vb) return va > vb;
  return ia < ib;
}

// Offers (v, id) to a list of k kept candidates sorted best first (filled with empty slots at the start).
LSEQ_HOST_DEVICE void topk_insert(float* values, int32_t* ids, int k, float v, int32_t id) {
  if (!topk_better(v, id, values[k - 1], ids[k - 1])) return;
  int i = k - 1;
  while (i > 0 && topk_better(v, id, values[i - 1], ids[i - 1])) {
    values[i] = values[i - 1];
    ids[i] = ids[i - 1];
    --i;
  }
  values[i] = v;
  ids[i] = id;
}

}  // namespace lseq::kernels
