#include "core/search/beam_search.h"

#include <algorithm>
#include <cmath>

#include "data/vocab.h"
#include "util/error.h"

namespace lseq {

namespace {

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
// on anything but the sentence's own candidates. A function object, so that the heap and sort calls inline it.
struct Better {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.ranking > b.ranking || (a.ranking == b.ranking && a.index < b.index);
  }
};
constexpr Better better;

// Keeps the best `width` candidates seen so far in a heap whose front is the worst of them.
class TopCandidates {
 public:
  void reset(int width) {
    width_ = width;
    heap_.clear();
  }
  // Keeps exactly the best `width` by better(), in whatever order candidates are offered.
  void offer(double ranking, int64_t index) {
    if (std::isnan(ranking)) return;
    const Candidate c{ranking, index};
    if (static_cast<int>(heap_.size()) < width_) {
      heap_.push_back(c);
      std::push_heap(heap_.begin(), heap_.end(), better);
    } else if (better(c, heap_.front())) {
      std::pop_heap(heap_.begin(), heap_.end(), better);
      heap_.back() = c;
      std::push_heap(heap_.begin(), heap_.end(), better);
    }
  }
  // True when the list is full and its worst ranks strictly above `ranking`: no candidate ranked at or below it can
  // enter any more (the worst kept only improves). A tie is not enough: the index decides those.
  bool closed_at(double ranking) const {
    return static_cast<int>(heap_.size()) >= width_ && (width_ == 0 || ranking < heap_.front().ranking);
  }
  // Best first.
  const std::vector<Candidate>& sorted() {
    std::sort(heap_.begin(), heap_.end(), better);
    return heap_;
  }

 private:
  int width_ = 0;
  std::vector<Candidate> heap_;
};

Hypothesis trace_back(const std::vector<TraceNode>& trace, const FinishedHypothesis& f,
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

}  // namespace

std::vector<NBestList> beam_search(StepModel& model, const data::Batch& batch, const BeamSearchOptions& options,
                                   const TokenSink& sink, const SentenceSink& done) {
  if (options.beam_size < 1) fail("--beam-size must be at least 1 (it is {})", options.beam_size);
  const int sentences = batch.size;
  std::vector<NBestList> results(sentences);
  if (sentences == 0) return results;
  model.start(batch.src, batch.src_lengths, sentences, batch.src_len);
  const int vocab = model.vocab_size();
  const int32_t eos = data::kEosId;
  const bool streaming = sink && options.beam_size == 1;  // a beam of one: each chosen token is final

  std::vector<int> limit(sentences);
  for (int s = 0; s < sentences; ++s)
    limit[s] = output_limit(source_tokens_without_eos(batch, s), options.max_length_factor, options.max_new_tokens,
                            options.max_context);

  std::vector<TraceNode> trace;
  std::vector<std::vector<FinishedHypothesis>> finished(sentences);
  std::vector<LiveHypothesis> live, next_live;
  for (int s = 0; s < sentences; ++s) live.push_back({s, -1, 0.0, 0.0, 0});
  std::vector<int32_t> tokens(sentences, data::kBosId), next_tokens, parents, sentence_of;
  // Per hypothesis the best beam_size words suffice (see step_topk's use below), eos coming separately.
  const int k = options.beam_size;
  std::vector<float> values, eos_log_probs;
  std::vector<int32_t> ids;
  TopCandidates top;
  // A sentence is finished at the step that leaves it no live hypothesis: its n-best list is final then.
  auto finish = [&](int s) {
    for (const auto& f : finished[s]) results[s].push_back(trace_back(trace, f, options));
    std::stable_sort(results[s].begin(), results[s].end(),
                     [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
    if (done) done(s, results[s]);
  };

  while (!live.empty()) {
    model.step_topk(tokens, k, values, ids, eos_log_probs);
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
        const int64_t base = static_cast<int64_t>(h - begin) * vocab;
        const double ranking = live[h].ranking;
        // eos has no word penalty; ids below eos (pad, unk, bos) are never produced.
        top.offer(ranking + eos_log_probs[h], base + eos);
        if (force_eos) continue;
        // The sentence keeps at most width <= beam_size candidates, so at most that many words of one hypothesis;
        // they all pay the same word penalty, so they are that hypothesis' best words by log-prob with lower ids
        // first on ties: the first `width` of step_topk's k = beam_size, in step_topk's (and better()'s) order.
        // They come by decreasing log-prob, so their rankings do not increase: once one ranks below everything
        // kept, so do the rest.
        const double word_ranking = ranking - options.word_penalty;
        for (int i = 0; i < k; ++i) {
          const int32_t v = ids[h * k + i];
          if (v < 0) break;  // fewer words than k
          const double word = word_ranking + values[h * k + i];
          if (top.closed_at(word)) break;
          top.offer(word, base + v);
        }
      }
      const size_t live_before = next_live.size();
      for (const Candidate& c : top.sorted()) {
        const size_t h = begin + static_cast<size_t>(c.index / vocab);
        const int32_t v = static_cast<int32_t>(c.index % vocab);
        float lp = eos_log_probs[h];
        if (v != eos)
          for (int i = 0; i < k; ++i)
            if (ids[h * k + i] == v) lp = values[h * k + i];
        trace.push_back({live[h].node, v, lp});
        if (streaming) sink(s, v);
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
      if (next_live.size() == live_before) finish(s);
      begin = end;
    }
    if (next_live.empty()) break;
    if (!keeps_all(parents, static_cast<int>(live.size()))) model.select(parents, sentence_of);
    live.swap(next_live);
    tokens.swap(next_tokens);
  }

  return results;  // every sentence was finished at its last step
}

}  // namespace lseq
