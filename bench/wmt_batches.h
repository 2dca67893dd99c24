#pragma once
// Synthetic training batches with a WMT-like length distribution, shared by bench_train_throughput and (through
// the file write_batch_shapes() writes) bench/pytorch_train.py, so that both train on exactly the same shapes.
//
// The distribution (see bench/README.md):
// - target length L_t (tokens before eos): lognormal with sigma 0.6 and mu = ln(28) - sigma^2 / 2, so its mean is
//   28 tokens (standard deviation about 18, 0.8% longer than 100); rounded and clipped to [1, 250];
// - source length L_s = round(L_t * U[0.8, 1.25]), clipped to [1, 250];
// - rows as lstrain builds them: src = L_s ids + eos, tgt_in = bos + L_t ids, tgt_out = L_t ids + eos, so a
//   sentence has L_t + 1 real target tokens; ids uniform in [4, vocab) (0..3 are pad, unk, bos, eos).
// Batching, as lib/data/batcher.cpp does it within one maxi-batch window: sentences are drawn until they hold
// pool x budget real target tokens, sorted by (target length, source length), and cut in order into batches
// whose PADDED TARGET tokens (sentences x longest target, eos included) stay within the budget. (lstrain's
// --mini-batch-words budgets the longer of the two sides; this benchmark budgets the target side so that a
// "4096-token batch" holds close to 4096 target positions.) The batches are shuffled with the seed and the first
// `pool` kept: a random sample of the length buckets, cycled by the timed steps.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/vocab.h"
#include "util/error.h"

namespace lseq::bench {

struct SentenceShape {
  int src = 0, tgt = 0;  // lengths before eos (L_s, L_t)
};

struct BatchShape {
  std::vector<SentenceShape> sentences;
  int src_len() const {  // padded, eos included
    int n = 0;
    for (const auto& s : sentences) n = std::max(n, s.src + 1);
    return n;
  }
  int tgt_len() const {
    int n = 0;
    for (const auto& s : sentences) n = std::max(n, s.tgt + 1);
    return n;
  }
  int64_t tgt_tokens() const {  // real target tokens (eos included): what tokens/s counts
    int64_t n = 0;
    for (const auto& s : sentences) n += s.tgt + 1;
    return n;
  }
};

constexpr int kLongestSentence = 250;

inline std::vector<BatchShape> wmt_like_batches(int64_t budget, int pool, uint64_t seed) {
  if (budget < kLongestSentence + 1) fail("--tokens {} is below the longest sentence ({} tokens)", budget,
                                          kLongestSentence + 1);
  if (pool < 1) fail("--pool must be at least 1 (got {})", pool);
  std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(budget));
  const double sigma = 0.6, mu = std::log(28.0) - sigma * sigma / 2;
  std::lognormal_distribution<double> length(mu, sigma);
  std::uniform_real_distribution<double> ratio(0.8, 1.25);
  auto clip = [](double x) { return static_cast<int>(std::clamp(std::lround(x), 1L, long(kLongestSentence))); };

  // Enough sentences for `pool` batches plus the padding and the last, partial batch.
  std::vector<SentenceShape> all;
  int64_t tokens = 0;
  while (tokens < (pool + 2) * budget) {
    SentenceShape s;
    s.tgt = clip(length(rng));
    s.src = clip(s.tgt * ratio(rng));
    tokens += s.tgt + 1;
    all.push_back(s);
  }
  std::stable_sort(all.begin(), all.end(), [](const SentenceShape& a, const SentenceShape& b) {
    return a.tgt != b.tgt ? a.tgt < b.tgt : a.src < b.src;
  });
  std::vector<BatchShape> batches;
  BatchShape open;
  int longest = 0;
  for (const auto& s : all) {
    const int new_longest = std::max(longest, s.tgt + 1);
    if (!open.sentences.empty() && static_cast<int64_t>(open.sentences.size() + 1) * new_longest > budget) {
      batches.push_back(std::move(open));
      open = BatchShape();
      longest = s.tgt + 1;
    } else {
      longest = new_longest;
    }
    open.sentences.push_back(s);
  }
  // The last batch is partial (fewer tokens than the others): left out.
  std::shuffle(batches.begin(), batches.end(), rng);
  if (static_cast<int>(batches.size()) < pool) fail("internal error: only {} batches for a pool of {}",
                                                    batches.size(), pool);
  batches.resize(pool);
  return batches;
}

// A data::Batch of the shape with ids uniform in [4, vocab) (seeded per batch).
inline data::Batch make_batch(const BatchShape& shape, int src_vocab, int tgt_vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> src_id(4, src_vocab - 1), tgt_id(4, tgt_vocab - 1);
  data::Batch b;
  b.size = static_cast<int>(shape.sentences.size());
  b.src_len = shape.src_len();
  b.tgt_len = shape.tgt_len();
  const std::size_t n_src = static_cast<std::size_t>(b.size) * b.src_len;
  const std::size_t n_tgt = static_cast<std::size_t>(b.size) * b.tgt_len;
  b.src.assign(n_src, data::kPadId);
  b.tgt_in.assign(n_tgt, data::kPadId);
  b.tgt_out.assign(n_tgt, data::kPadId);
  for (int r = 0; r < b.size; ++r) {
    const SentenceShape& s = shape.sentences[r];
    int32_t* src = b.src.data() + static_cast<std::size_t>(r) * b.src_len;
    for (int i = 0; i < s.src; ++i) src[i] = src_id(rng);
    src[s.src] = data::kEosId;
    int32_t* in = b.tgt_in.data() + static_cast<std::size_t>(r) * b.tgt_len;
    int32_t* out = b.tgt_out.data() + static_cast<std::size_t>(r) * b.tgt_len;
    in[0] = data::kBosId;
    for (int i = 0; i < s.tgt; ++i) in[i + 1] = out[i] = tgt_id(rng);
    out[s.tgt] = data::kEosId;
    b.src_lengths.push_back(s.src + 1);
    b.tgt_lengths.push_back(s.tgt + 1);
    b.line_ids.push_back(r);
  }
  return b;
}

// The shapes of one case, appended to `path` for bench/pytorch_train.py. Format (text, one record a line):
//   case tokens=<budget> pool=<n> seed=<s>
//   batch <sentences> <src_len> <tgt_len> <real target tokens>
//   src <L_s + 1 of each sentence>      (eos included)
//   tgt <L_t + 1 of each sentence>      (eos / bos included)
inline void write_batch_shapes(const std::string& path, int64_t budget, uint64_t seed,
                               const std::vector<BatchShape>& batches, bool append) {
  std::FILE* f = std::fopen(path.c_str(), append ? "a" : "w");
  if (!f) fail("cannot write the batch shapes to {} (--dump-batches); check the directory", path);
  fmt::print(f, "case tokens={} pool={} seed={}\n", budget, batches.size(), seed);
  for (const auto& b : batches) {
    fmt::print(f, "batch {} {} {} {}\n", b.sentences.size(), b.src_len(), b.tgt_len(), b.tgt_tokens());
    std::string src = "src", tgt = "tgt";
    for (const auto& s : b.sentences) {
      src += fmt::format(" {}", s.src + 1);
      tgt += fmt::format(" {}", s.tgt + 1);
    }
    fmt::print(f, "{}\n{}\n", src, tgt);
  }
  if (std::fclose(f) != 0) fail("cannot write the batch shapes to {} (--dump-batches): disk full?", path);
}

}  // namespace lseq::bench
