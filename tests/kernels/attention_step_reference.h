#pragma once
// The double-precision reference of Backend::attention_step (incremental decoding's attention), and random cases
// for it, shared by the CPU and GPU tests.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels_test_util.h"

namespace lseq::kernels::test {

struct AttentionStepCase {
  int rows, heads, head_dim, k_len;
  int64_t slice_stride;  // >= k_len * head_dim; larger leaves gaps (a cache planned for longer sequences)
  bool shared;           // kv_index: groups of rows share slices (hypotheses of one sentence share its keys)
  bool with_lengths;     // k_lengths: per-row masks, including a row with no keys and one longer than k_len
  bool with_origin = false;  // origin: key j of row r from a random row's slice at position j (not with shared)
  bool with_starts = false;  // key_starts: each row's first key (a language model's prompts of different lengths)
};

inline std::string describe(const AttentionStepCase& c) {
  return std::to_string(c.rows) + " rows x " + std::to_string(c.heads) + " heads x " + std::to_string(c.head_dim) +
         " dims, k_len " + std::to_string(c.k_len) + ", stride " + std::to_string(c.slice_stride) +
         (c.shared ? ", shared slices" : "") + (c.with_lengths ? ", lengths" : "") +
         (c.with_origin ? ", origin table" : "") + (c.with_starts ? ", key starts" : "");
}

// The inputs of one case: q [rows*heads*head_dim], k and v [source slices * slice_stride], and the index arrays.
// With an origin table: more source rows than rows (a cache planned for more hypotheses than are live), and
// origin [rows][origin_stride] with a gap after k_len entries that holds -1 (never read).
struct AttentionStepInputs {
  int source_slices = 0;
  std::vector<float> q, k, v;
  std::vector<int32_t> kv_index, k_lengths, origin, key_starts;
  int origin_stride = 0;
};

inline AttentionStepInputs make_inputs(const AttentionStepCase& c, uint64_t seed) {
  AttentionStepInputs in;
  const int slices = c.rows * c.heads;
  const int beam = c.shared ? 3 : 1;  // rows r and r' share keys when r / beam == r' / beam
  const int origin_rows = c.rows + 2;
  in.source_slices = c.shared        ? ((c.rows + beam - 1) / beam) * c.heads
                     : c.with_origin ? origin_rows * c.heads
                                     : slices;
  in.q = random_floats(std::size_t(slices) * c.head_dim, seed, -2.0f, 2.0f);
  in.k = random_floats(std::size_t(in.source_slices) * c.slice_stride, seed + 1, -2.0f, 2.0f);
  in.v = random_floats(std::size_t(in.source_slices) * c.slice_stride, seed + 2);
  if (c.shared) {
    for (int r = 0; r < c.rows; ++r)
      for (int h = 0; h < c.heads; ++h) in.kv_index.push_back((r / beam) * c.heads + h);
  }
  if (c.with_origin) {
    in.origin_stride = c.k_len + 3;
    in.origin.assign(std::size_t(c.rows) * in.origin_stride, -1);
    const auto picks = random_ints(std::size_t(c.rows) * c.k_len, seed + 4, 0, origin_rows - 1);
    for (int r = 0; r < c.rows; ++r)
      for (int j = 0; j < c.k_len; ++j)
        in.origin[std::size_t(r) * in.origin_stride + j] = picks[std::size_t(r) * c.k_len + j];
  }
  if (c.with_lengths) {
    in.k_lengths = random_ints(c.rows, seed + 3, 1, c.k_len);
    in.k_lengths[0] = 0;                                  // a row without keys: context 0
    if (c.rows > 1) in.k_lengths[1] = c.k_len + 5;        // longer than k_len: clamped
    if (c.rows > 2) in.k_lengths[2] = std::min(1, c.k_len);  // a single key: context = its value
  }
  if (c.with_starts) {
    in.key_starts = random_ints(c.rows, seed + 5, 0, c.k_len - 1);
    if (c.rows > 4) in.key_starts[3] = 0;
    if (c.rows > 1) in.key_starts[c.rows - 1] = c.k_len + 2;  // past every key: context 0
  }
  return in;
}

// context [rows*heads*head_dim] in double.
inline std::vector<double> attention_step_reference(const AttentionStepCase& c, const AttentionStepInputs& in,
                                                    float scale) {
  std::vector<double> out(std::size_t(c.rows) * c.heads * c.head_dim, 0.0);
  for (int r = 0; r < c.rows; ++r) {
    const int valid = in.k_lengths.empty() ? c.k_len : std::clamp(in.k_lengths[r], 0, c.k_len);
    const int first = in.key_starts.empty() ? 0 : std::clamp(in.key_starts[r], 0, valid);
    for (int h = 0; h < c.heads; ++h) {
      const int64_t i = int64_t(r) * c.heads + h;
      const int64_t fixed = in.kv_index.empty() ? i : in.kv_index[i];
      // Element offset of key (and value) j.
      auto at = [&](int j) {
        const int64_t s =
            in.origin.empty() ? fixed : int64_t(in.origin[std::size_t(r) * in.origin_stride + j]) * c.heads + h;
        return s * c.slice_stride + int64_t(j) * c.head_dim;
      };
      std::vector<double> p(valid);
      double max = -INFINITY, sum = 0.0;
      for (int j = first; j < valid; ++j) {
        double dot = 0.0;
        for (int d = 0; d < c.head_dim; ++d)
          dot += double(in.q[i * c.head_dim + d]) * in.k[at(j) + d];
        p[j] = double(scale) * dot;
        max = std::max(max, p[j]);
      }
      for (int j = first; j < valid; ++j) sum += (p[j] = std::exp(p[j] - max));
      for (int d = 0; d < c.head_dim; ++d) {
        double acc = 0.0;
        for (int j = first; j < valid; ++j) acc += p[j] * in.v[at(j) + d];
        out[i * c.head_dim + d] = valid > first ? acc / sum : 0.0;
      }
    }
  }
  return out;
}

}  // namespace lseq::kernels::test
