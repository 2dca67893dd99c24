#pragma once
// Helpers of the language-model tests: tiny configs, batches of lines (bos w1..wn -> w1..wn eos), packed blocks
// of documents with their doc_starts, and log-softmax rows in double.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/model/model_config.h"
#include "data/batch.h"

namespace lseq::test {

inline ModelConfig tiny_lm_config(NormPlacement norm = NormPlacement::pre, bool learned = false,
                                  kernels::Activation act = kernels::Activation::gelu, float dropout = 0.0f,
                                  int max_length = 40) {
  ModelConfig c;
  c.type = ModelType::lm;
  c.tgt_vocab = c.src_vocab = 13;
  c.dim_emb = 8;
  c.enc_depth = 0;
  c.dec_depth = 2;
  c.heads = 2;
  c.dim_ffn = 16;
  c.activation = act;
  c.dropout = c.dropout_attention = c.dropout_ffn = dropout;
  c.norm = norm;
  c.tied = TiedEmbeddings::target;
  c.learned_positions = learned;
  c.max_length = max_length;
  c.label_smoothing = 0.1f;
  return c;
}

// `count` lines of random length in [min_words, max_words] over word ids [4, vocab).
inline std::vector<std::vector<int32_t>> random_lines(std::mt19937_64& rng, int count, int min_words, int max_words,
                                                      int vocab) {
  std::uniform_int_distribution<int> length(min_words, max_words), id(4, vocab - 1);
  std::vector<std::vector<int32_t>> lines(count);
  for (auto& line : lines) {
    const int n = length(rng);
    for (int i = 0; i < n; ++i) line.push_back(id(rng));
  }
  return lines;
}

// One sequence per line, padded with 0: tgt_in = bos + words, tgt_out = words + eos.
inline data::Batch lines_batch(const std::vector<std::vector<int32_t>>& lines) {
  data::Batch b;
  b.size = static_cast<int>(lines.size());
  for (const auto& line : lines) b.tgt_len = std::max(b.tgt_len, static_cast<int>(line.size()) + 1);
  const std::size_t T = static_cast<std::size_t>(b.tgt_len);
  b.tgt_in.assign(lines.size() * T, 0);
  b.tgt_out.assign(lines.size() * T, 0);
  for (std::size_t s = 0; s < lines.size(); ++s) {
    b.tgt_in[s * T] = 2;  // bos
    std::copy(lines[s].begin(), lines[s].end(), b.tgt_in.begin() + s * T + 1);
    std::copy(lines[s].begin(), lines[s].end(), b.tgt_out.begin() + s * T);
    b.tgt_out[s * T + lines[s].size()] = 3;  // eos
    b.tgt_lengths.push_back(static_cast<int32_t>(lines[s].size()) + 1);
    b.line_ids.push_back(static_cast<int64_t>(s));
  }
  return b;
}

// Rows of documents packed end to end, each document one line (its pairs as lines_batch has them); doc_starts when
// `masked`. rows[r] lists the lines of row r; rows are padded to the longest.
inline data::Batch packed_batch(const std::vector<std::vector<std::vector<int32_t>>>& rows, bool masked) {
  data::Batch b;
  b.size = static_cast<int>(rows.size());
  for (const auto& row : rows) {
    int n = 0;
    for (const auto& line : row) n += static_cast<int>(line.size()) + 1;
    b.tgt_len = std::max(b.tgt_len, n);
  }
  const std::size_t T = static_cast<std::size_t>(b.tgt_len);
  b.tgt_in.assign(rows.size() * T, 0);
  b.tgt_out.assign(rows.size() * T, 0);
  if (masked) b.doc_starts.assign(rows.size() * T, 0);
  for (std::size_t r = 0; r < rows.size(); ++r) {
    std::size_t at = r * T;
    int32_t start = 0;
    for (const auto& line : rows[r]) {
      start = static_cast<int32_t>(at - r * T);
      for (std::size_t o = 0; o <= line.size(); ++o, ++at) {
        b.tgt_in[at] = o == 0 ? 2 : line[o - 1];
        b.tgt_out[at] = o < line.size() ? line[o] : 3;
        if (masked) b.doc_starts[at] = start;
      }
    }
    for (std::size_t i = at - r * T; masked && i < T; ++i) b.doc_starts[r * T + i] = start;
    b.tgt_lengths.push_back(static_cast<int32_t>(at - r * T));
    b.line_ids.push_back(static_cast<int64_t>(r));
  }
  return b;
}

inline std::vector<double> log_softmax_row(const float* x, int n) {
  double max = x[0];
  for (int v = 1; v < n; ++v) max = std::max(max, static_cast<double>(x[v]));
  double sum = 0;
  for (int v = 0; v < n; ++v) sum += std::exp(x[v] - max);
  std::vector<double> y(n);
  for (int v = 0; v < n; ++v) y[v] = x[v] - max - std::log(sum);
  return y;
}

}  // namespace lseq::test
