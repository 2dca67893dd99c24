#pragma once
// Helpers for the search tests: random source sentences, an independent greedy decoder and an exhaustive search
// over the toy model (toy_step_model.h), and a recorder of what a SentenceSink hears.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/search/search_types.h"
#include "data/translation_input.h"
#include "toy_step_model.h"

namespace lseq::testing {

constexpr int32_t kEos = 3;
constexpr int32_t kFirstWord = 4;  // ids 0..3 are pad, unk, bos, eos

inline std::vector<std::vector<int32_t>> random_sources(int count, int vocab, int min_len, int max_len,
                                                        uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> out(count);
  for (auto& s : out) {
    int len = min_len + static_cast<int>(rng() % static_cast<uint64_t>(max_len - min_len + 1));
    for (int i = 0; i < len; ++i) s.push_back(kFirstWord + static_cast<int32_t>(rng() % (vocab - kFirstWord)));
  }
  return out;
}

// What a SentenceSink hears: each sentence's list and the model's step count when it came (0: not heard); a
// sentence heard twice fails the test.
struct HeardSentences {
  explicit HeardSentences(size_t sentences) : at_step(sentences, 0), lists(sentences) {}
  SentenceSink sink(const ToyStepModel& model) {
    return [this, &model](int sentence, const NBestList& list) {
      EXPECT_EQ(at_step.at(static_cast<size_t>(sentence)), 0) << "sentence " << sentence << " handed over twice";
      at_step[static_cast<size_t>(sentence)] = model.steps;
      lists[static_cast<size_t>(sentence)] = list;
    };
  }
  std::vector<int> at_step;
  std::vector<NBestList> lists;
};

inline std::vector<int32_t> with_eos(std::vector<int32_t> ids) {
  ids.push_back(kEos);
  return ids;
}

// The reference: at each step the allowed token with the highest log-prob (lowest id on a tie), eos forced at
// the length limit; word log-probs from the model evaluated directly.
struct Reference {
  std::vector<int32_t> tokens;
  std::vector<double> word_log_probs;
  double log_prob = 0;
};

// With a word penalty, every word (not eos) costs `word_penalty`, which shifts the choice towards eos.
inline Reference greedy_reference(const ToyStepModel& model, const std::vector<int32_t>& source, double factor,
                                  double word_penalty = 0.0) {
  Reference r;
  const int limit = std::max(1, static_cast<int>(std::floor(factor * source.size())));
  while (true) {
    std::vector<double> row = model.row(with_eos(source), r.tokens);
    int32_t best = kEos;
    if (static_cast<int>(r.tokens.size()) < limit) {
      best = -1;
      for (int v = 0; v < static_cast<int>(row.size()); ++v)
        if (v != 0 && v != 1 && v != 2 &&
            (best < 0 || row[v] - (v == kEos ? 0 : word_penalty) > row[best] - (best == kEos ? 0 : word_penalty)))
          best = v;
    }
    r.word_log_probs.push_back(row[best]);
    r.log_prob += row[best];
    if (best == kEos) return r;
    r.tokens.push_back(best);
  }
}

// Every output of at most `limit` words (ids kFirstWord..vocab-1) followed by eos, with its log-prob.
inline std::vector<Reference> enumerate_outputs(const ToyStepModel& model, const std::vector<int32_t>& source,
                                                int limit) {
  std::vector<Reference> all;
  std::vector<Reference> frontier{Reference{}};
  while (!frontier.empty()) {
    std::vector<Reference> next;
    for (const Reference& p : frontier) {
      std::vector<double> row = model.row(with_eos(source), p.tokens);
      Reference done = p;
      done.word_log_probs.push_back(row[kEos]);
      done.log_prob += row[kEos];
      all.push_back(done);
      if (static_cast<int>(p.tokens.size()) >= limit) continue;
      for (int v = kFirstWord; v < static_cast<int>(row.size()); ++v) {
        Reference longer = p;
        longer.tokens.push_back(v);
        longer.word_log_probs.push_back(row[v]);
        longer.log_prob += row[v];
        next.push_back(longer);
      }
    }
    frontier.swap(next);
  }
  return all;
}

// Final score computed here independently of final_score().
inline double reference_score(const Reference& r, double normalize, double word_penalty) {
  double n = static_cast<double>(r.tokens.size());
  return (r.log_prob - word_penalty * n) / std::pow(n + 1, normalize);
}

}  // namespace lseq::testing
