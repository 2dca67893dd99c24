#pragma once
// A small hand-made StepModel for search tests: the next-token distribution is a fixed pseudo-random function of
// (the sentence's source ids, the whole target prefix), so hypotheses differ in non-trivial ways, yet every
// sentence is scored independently of its batch, like a real model. row() evaluates the same model directly (in
// double) so that tests can enumerate and score sequences without going through search.
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/search/step_model.h"
#include "util/splitmix64.h"

namespace lseq::testing {

class ToyStepModel : public StepModel {
 public:
  // eos_bias is added to eos's logit (negative: longer outputs).
  ToyStepModel(int vocab, uint64_t seed, double eos_bias = 0.0) : vocab_(vocab), seed_(seed), eos_bias_(eos_bias) {}

  int vocab_size() const override { return vocab_; }

  void start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override {
    if (static_cast<int>(src.size()) != sentences * src_len || static_cast<int>(src_lengths.size()) != sentences)
      throw std::logic_error("ToyStepModel::start: inconsistent sizes");
    source_hash_.assign(sentences, 0);
    for (int s = 0; s < sentences; ++s)
      source_hash_[s] = hash_source(std::vector<int32_t>(src.begin() + s * src_len,
                                                         src.begin() + s * src_len + src_lengths[s]));
    hyps_.clear();
    for (int s = 0; s < sentences; ++s) hyps_.push_back({s, kEmptyPrefix});
    ++starts;
  }

  void select(const std::vector<int32_t>& parents, const std::vector<int32_t>& sentence_of) override {
    if (parents.size() != sentence_of.size()) throw std::logic_error("ToyStepModel::select: sizes differ");
    std::vector<Hyp> next;
    for (size_t j = 0; j < parents.size(); ++j) {
      if (parents[j] < 0 || parents[j] >= static_cast<int>(hyps_.size()))
        throw std::logic_error("ToyStepModel::select: parent out of range");
      if (hyps_[parents[j]].sentence != sentence_of[j])
        throw std::logic_error("ToyStepModel::select: sentence_of disagrees with the parent's sentence");
      next.push_back(hyps_[parents[j]]);
    }
    hyps_.swap(next);
    ++selects;
  }

  void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) override {
    if (tokens.size() != hyps_.size()) throw std::logic_error("ToyStepModel::step: one token per hypothesis");
    log_probs.resize(hyps_.size() * vocab_);
    std::vector<double> row;
    for (size_t h = 0; h < hyps_.size(); ++h) {
      hyps_[h].prefix = extend(hyps_[h].prefix, tokens[h]);
      row_for(source_hash_[hyps_[h].sentence], hyps_[h].prefix, row);
      for (int v = 0; v < vocab_; ++v) log_probs[h * vocab_ + v] = static_cast<float>(row[v]);
    }
    ++steps;
    live_per_step.push_back(static_cast<int>(hyps_.size()));
  }

  int live() const override { return static_cast<int>(hyps_.size()); }

  // Continuous batching, once allowed: admitted sentences join with the next sentence numbers (no cache to run out).
  void allow_admission(int max_sentences) { max_sentences_ = max_sentences; }
  bool can_admit() const override { return max_sentences_ > 0; }
  int max_sentences() const override { return max_sentences_; }
  int steps_left() const override { return 1 << 20; }
  void admit(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override {
    if (!can_admit()) throw std::logic_error("ToyStepModel::admit: admission not allowed");
    if (static_cast<int>(src.size()) != sentences * src_len || static_cast<int>(src_lengths.size()) != sentences)
      throw std::logic_error("ToyStepModel::admit: inconsistent sizes");
    for (int s = 0; s < sentences; ++s) {
      hyps_.push_back({static_cast<int>(source_hash_.size()), kEmptyPrefix});
      source_hash_.push_back(hash_source(std::vector<int32_t>(src.begin() + s * src_len,
                                                              src.begin() + s * src_len + src_lengths[s])));
    }
    ++admissions;
  }

  // The model itself: log-probabilities (double) of the next token after bos + `prefix` for source `src` (ids
  // + eos), rounded to float as step() reports them.
  std::vector<double> row(const std::vector<int32_t>& src, const std::vector<int32_t>& prefix) const {
    uint64_t p = extend(kEmptyPrefix, 2);  // bos
    for (int32_t t : prefix) p = extend(p, t);
    std::vector<double> out;
    row_for(hash_source(src), p, out);
    for (double& x : out) x = static_cast<float>(x);
    return out;
  }

  int steps = 0, starts = 0, selects = 0, admissions = 0;
  std::vector<int> live_per_step;

 private:
  static constexpr uint64_t kEmptyPrefix = 0x12345678ULL;
  struct Hyp {
    int sentence;
    uint64_t prefix;
  };

  static uint64_t extend(uint64_t prefix, int32_t token) { return mix64(prefix * 31 + static_cast<uint64_t>(token)); }
  static uint64_t hash_source(const std::vector<int32_t>& ids) {
    uint64_t h = 99;
    for (int32_t t : ids) h = mix64(h ^ static_cast<uint64_t>(t));
    return h;
  }

  void row_for(uint64_t source, uint64_t prefix, std::vector<double>& out) const {
    out.resize(vocab_);
    double best = -1e300;
    for (int v = 0; v < vocab_; ++v) {
      uint64_t r = mix64(seed_ ^ mix64(source ^ mix64(prefix + static_cast<uint64_t>(v))));
      out[v] = 4.0 * (static_cast<double>(r >> 11) * 0x1.0p-53) - 2.0 + (v == 3 ? eos_bias_ : 0.0);
      best = std::max(best, out[v]);
    }
    double total = 0;
    for (double x : out) total += std::exp(x - best);
    double log_total = best + std::log(total);
    for (double& x : out) x -= log_total;
  }

  int vocab_;
  uint64_t seed_;
  double eos_bias_;
  std::vector<uint64_t> source_hash_;
  std::vector<Hyp> hyps_;
  int max_sentences_ = 0;
};

}  // namespace lseq::testing
