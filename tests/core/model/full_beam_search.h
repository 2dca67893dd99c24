#pragma once
// The beam search lseq ran before step_topk: it reads every hypothesis' whole next-token distribution through
// StepModel::step and ranks all (hypothesis, token) candidates on the host. Kept verbatim as the reference that
// beam_search over step_topk must reproduce exactly (tests/core/model/step_topk_test.cpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/search/beam_search.h"
#include "data/vocab.h"
#include "util/error.h"

namespace lseq::testing {

namespace full_search_detail {


// Every chosen token is a node of a trace tree; a hypothesis is a path from a root (parent -1) to its last node.
struct TraceNode {
  int32_t parent;
  int32_t token;
  float log_prob;
};

struct LiveHypothesis {
  int sentence;
  int32_t node;     // last token's trace node; -1 before the first token
  double ranking;   // log_prob minus the word penalties so far: what candidates are ranked by
  double log_prob;
  int tokens;
};

struct FinishedHypothesis {
  int32_t node;  // the eos node
  double log_prob;
  int tokens;  // without eos
};

struct Candidate {
  double ranking;
  int64_t index;  // local hypothesis * vocab + token, within one sentence's beam
};

// Higher ranking first; on a tie the lower index (earlier hypothesis, smaller id) wins, so results do not depend
// on anything but the sentence's own candidates.
inline bool better(const Candidate& a, const Candidate& b) {
  return a.ranking > b.ranking || (a.ranking == b.ranking && a.index < b.index);
}

// Keeps the best `width` candidates seen so far in a heap whose front is the worst of them.
class TopCandidates {
 public:
  void reset(int width) {
    width_ = width;
    heap_.clear();
  }
  // Candidates must be offered in increasing index order (so an equal ranking never displaces a kept one).
  void offer(double ranking, int64_t index) {
    if (std::isnan(ranking)) return;
    if (static_cast<int>(heap_.size()) < width_) {
      heap_.push_back({ranking, index});
      std::push_heap(heap_.begin(), heap_.end(), better);
    } else if (ranking > heap_.front().ranking) {
      std::pop_heap(heap_.begin(), heap_.end(), better);
      heap_.back() = {ranking, index};
      std::push_heap(heap_.begin(), heap_.end(), better);
    }
  }
  bool full() const { return static_cast<int>(heap_.size()) >= width_; }
  double threshold() const { return heap_.front().ranking; }  // only when full()
  // Best first.
  const std::vector<Candidate>& sorted() {
    std::sort(heap_.begin(), heap_.end(), better);
    return heap_;
  }

 private:
  int width_ = 0;
  std::vector<Candidate> heap_;
};

inline Hypothesis trace_back(const std::vector<TraceNode>& trace, const FinishedHypothesis& f,
                      const BeamSearchOptions& options) {
  Hypothesis h;
  h.tokens.resize(f.tokens);
  h.word_log_probs.resize(f.tokens + 1);
  int32_t node = f.node;
  for (int i = f.tokens; i >= 0; --i) {
    if (i < f.tokens) h.tokens[i] = trace[node].token;
    h.word_log_probs[i] = trace[node].log_prob;
    node = trace[node].parent;
  }
  // Summed front to back, as teacher-forced scoring sums them, so both report the same double.
  for (float lp : h.word_log_probs) h.log_prob += lp;
  h.score = final_score(h.log_prob, f.tokens, options.normalize, options.word_penalty);
  return h;
}

}  // namespace full_search_detail

inline std::vector<NBestList> full_distribution_beam_search(StepModel& model, const data::Batch& batch,
                                                            const BeamSearchOptions& options) {
  if (options.beam_size < 1) fail("--beam-size must be at least 1 (it is {})", options.beam_size);
  const int sentences = batch.size;
  std::vector<NBestList> results(sentences);
  if (sentences == 0) return results;
  model.start(batch.src, batch.src_lengths, sentences, batch.src_len);
  const int vocab = model.vocab_size();
  const int32_t eos = data::kEosId;

  std::vector<int> limit(sentences);
  for (int s = 0; s < sentences; ++s)
    limit[s] = max_output_tokens(source_tokens_without_eos(batch, s), options.max_length_factor);

  std::vector<full_search_detail::TraceNode> trace;
  std::vector<std::vector<full_search_detail::FinishedHypothesis>> finished(sentences);
  std::vector<full_search_detail::LiveHypothesis> live, next_live;
  for (int s = 0; s < sentences; ++s) live.push_back({s, -1, 0.0, 0.0, 0});
  std::vector<int32_t> tokens(sentences, data::kBosId), next_tokens, parents, sentence_of;
  std::vector<float> log_probs;
  full_search_detail::TopCandidates top;

  while (!live.empty()) {
    model.step(tokens, log_probs);
    next_live.clear();
    next_tokens.clear();
    parents.clear();
    sentence_of.clear();
    // Live hypotheses are grouped by sentence, and all of one sentence have the same length.
    for (size_t begin = 0; begin < live.size();) {
      const int s = live[begin].sentence;
      size_t end = begin;
      while (end < live.size() && live[end].sentence == s) ++end;
      top.reset(options.beam_size - static_cast<int>(finished[s].size()));
      const bool force_eos = live[begin].tokens >= limit[s];
      for (size_t h = begin; h < end; ++h) {
        const float* row = log_probs.data() + h * static_cast<size_t>(vocab);
        const int64_t base = static_cast<int64_t>(h - begin) * vocab;
        const double ranking = live[h].ranking;
        if (force_eos) {
          top.offer(ranking + row[eos], base + eos);
          continue;
        }
        // Ids below eos (pad, unk, bos) are never produced; eos has no word penalty. Offering in increasing id
        // order keeps the tie rule of TopCandidates.
        top.offer(ranking + row[eos], base + eos);
        const double word_ranking = ranking - options.word_penalty;
        // Hot loop: a cheap pre-filter on the raw log-prob, slightly loose so that rounding never rejects a
        // candidate the exact comparison in offer() would keep.
        auto cutoff = [&]() {
          if (!top.full()) return -std::numeric_limits<double>::infinity();
          double c = top.threshold() - word_ranking;
          return c - 1e-9 * (1.0 + std::fabs(c));
        };
        double least = cutoff();
        for (int v = eos + 1; v < vocab; ++v) {
          if (!(static_cast<double>(row[v]) >= least)) continue;
          top.offer(word_ranking + row[v], base + v);
          least = cutoff();
        }
      }
      for (const full_search_detail::Candidate& c : top.sorted()) {
        const size_t h = begin + static_cast<size_t>(c.index / vocab);
        const int32_t v = static_cast<int32_t>(c.index % vocab);
        const float lp = log_probs[h * static_cast<size_t>(vocab) + v];
        trace.push_back({live[h].node, v, lp});
        const int32_t node = static_cast<int32_t>(trace.size() - 1);
        if (v == eos) {
          finished[s].push_back({node, live[h].log_prob + lp, live[h].tokens});
        } else {
          next_live.push_back({s, node, c.ranking, live[h].log_prob + lp, live[h].tokens + 1});
          parents.push_back(static_cast<int32_t>(h));
          sentence_of.push_back(s);
          next_tokens.push_back(v);
        }
      }
      begin = end;
    }
    if (next_live.empty()) break;
    if (!keeps_all(parents, static_cast<int>(live.size()))) model.select(parents, sentence_of);
    live.swap(next_live);
    tokens.swap(next_tokens);
  }

  for (int s = 0; s < sentences; ++s) {
    for (const auto& f : finished[s]) results[s].push_back(full_search_detail::trace_back(trace, f, options));
    std::stable_sort(results[s].begin(), results[s].end(),
                     [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
  }
  return results;
}

}  // namespace lseq::testing
