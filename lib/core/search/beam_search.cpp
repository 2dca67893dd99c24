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

// One search over a StepModel: its sentences (numbered in the order they joined, as StepModel::start and admit
// number them) and live hypotheses, advanced one step at a time. beam_search runs one batch through it;
// beam_search_continuous adds sentences while others still run.
class Search {
 public:
  Search(StepModel& model, const BeamSearchOptions& options, const TokenSink& sink, const SentenceSink& done)
      : model_(model), options_(options), sink_(sink), done_(done), k_(options.beam_size) {
    if (options.beam_size < 1) fail("--beam-size must be at least 1 (it is {})", options.beam_size);
  }

  // The sentences of `batch` join with only bos decoded: through StepModel::start when nothing is live (a new
  // search: sentence numbers start again at 0), else through StepModel::admit. Returns the number of the first.
  int join(const data::Batch& batch) {
    const bool fresh = live_.empty();
    if (fresh) {
      model_.start(batch.src, batch.src_lengths, batch.size, batch.src_len);
      finished_.clear();
      limit_.clear();
      trace_.clear();
      tokens_.clear();
    } else {
      model_.admit(batch.src, batch.src_lengths, batch.size, batch.src_len);
    }
    const int first = static_cast<int>(limit_.size());
    if (fresh) row_bound_ = live_sentences_ = 0;
    row_bound_ += batch.size * options_.beam_size;
    live_sentences_ += batch.size;
    for (int s = 0; s < batch.size; ++s) {
      limit_.push_back(output_limit(source_tokens_without_eos(batch, s), options_.max_length_factor,
                                    options_.max_new_tokens, options_.max_context));
      finished_.emplace_back();
      live_.push_back({first + s, -1, 0.0, 0.0, 0});
      tokens_.push_back(data::kBosId);
    }
    return first;
  }

  bool running() const { return !live_.empty(); }
  int live_sentences() const { return live_sentences_; }
  // The most live hypotheses the live sentences can have at any later step: each keeps at most beam_size less its
  // finished hypotheses, and a sentence's finished hypotheses only grow.
  int row_bound() const { return row_bound_; }

  // Every live hypothesis advances one token; a sentence left without live hypotheses is finished (done_).
  void step() {
    model_.step_topk(tokens_, k_, values_, ids_, eos_log_probs_);
    next_live_.clear();
    next_tokens_.clear();
    parents_.clear();
    sentence_of_.clear();
    live_sentences_ = 0;
    row_bound_ = 0;
    // Live hypotheses are grouped by sentence, and all of one sentence have the same length.
    for (size_t begin = 0; begin < live_.size();) {
      const int s = live_[begin].sentence;
      size_t end = begin;
      while (end < live_.size() && live_[end].sentence == s) ++end;
      advance_sentence(s, begin, end);
      begin = end;
    }
    if (!next_live_.empty() && !keeps_all(parents_, static_cast<int>(live_.size())))
      model_.select(parents_, sentence_of_);
    live_.swap(next_live_);
    tokens_.swap(next_tokens_);
  }

 private:
  // Sentence s's live hypotheses live_[begin, end): keeps its best candidates (see beam_search's header).
  void advance_sentence(int s, size_t begin, size_t end) {
    const int vocab = model_.vocab_size();
    const int32_t eos = data::kEosId;
    const int k = k_;
    top_.reset(options_.beam_size - static_cast<int>(finished_[s].size()));
    const bool force_eos = live_[begin].tokens >= limit_[s];
    for (size_t h = begin; h < end; ++h) {
      const int64_t base = static_cast<int64_t>(h - begin) * vocab;
      const double ranking = live_[h].ranking;
      // eos has no word penalty; ids below eos (pad, unk, bos) are never produced.
      top_.offer(ranking + eos_log_probs_[h], base + eos);
      if (force_eos) continue;
      // The sentence keeps at most width <= beam_size candidates, so at most that many words of one hypothesis;
      // they all pay the same word penalty, so they are that hypothesis' best words by log-prob with lower ids
      // first on ties: the first `width` of step_topk's k = beam_size, in step_topk's (and better()'s) order.
      // They come by decreasing log-prob, so their rankings do not increase: once one ranks below everything
      // kept, so do the rest.
      const double word_ranking = ranking - options_.word_penalty;
      for (int i = 0; i < k; ++i) {
        const int32_t v = ids_[h * k + i];
        if (v < 0) break;  // fewer words than k
        const double word = word_ranking + values_[h * k + i];
        if (top_.closed_at(word)) break;
        top_.offer(word, base + v);
      }
    }
    const size_t live_before = next_live_.size();
    const bool streaming = sink_ && options_.beam_size == 1;  // a beam of one: each chosen token is final
    for (const Candidate& c : top_.sorted()) {
      const size_t h = begin + static_cast<size_t>(c.index / vocab);
      const int32_t v = static_cast<int32_t>(c.index % vocab);
      float lp = eos_log_probs_[h];
      if (v != eos)
        for (int i = 0; i < k; ++i)
          if (ids_[h * k + i] == v) lp = values_[h * k + i];
      trace_.push_back({live_[h].node, v, lp});
      if (streaming) sink_(s, v);
      const int32_t node = static_cast<int32_t>(trace_.size() - 1);
      if (v == eos) {
        finished_[s].push_back({node, live_[h].log_prob + lp, live_[h].tokens});
      } else {
        next_live_.push_back({s, node, c.ranking, live_[h].log_prob + lp, live_[h].tokens + 1});
        parents_.push_back(static_cast<int32_t>(h));
        sentence_of_.push_back(s);
        next_tokens_.push_back(v);
      }
    }
    if (next_live_.size() == live_before) {
      finish(s);
    } else {
      ++live_sentences_;
      row_bound_ += options_.beam_size - static_cast<int>(finished_[s].size());
    }
  }

  // A sentence is finished at the step that leaves it no live hypothesis: its n-best list is final then.
  void finish(int s) {
    NBestList list;
    for (const auto& f : finished_[s]) list.push_back(trace_back(trace_, f, options_));
    std::stable_sort(list.begin(), list.end(),
                     [](const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; });
    finished_[s].clear();
    finished_[s].shrink_to_fit();
    done_(s, list);
  }

  StepModel& model_;
  const BeamSearchOptions& options_;
  const TokenSink sink_;
  const SentenceSink done_;
  // Per hypothesis the best beam_size words suffice (see step_topk's use above), eos coming separately.
  const int k_;
  int live_sentences_ = 0, row_bound_ = 0;

  std::vector<TraceNode> trace_;
  std::vector<std::vector<FinishedHypothesis>> finished_;  // per sentence
  std::vector<int> limit_;                                 // per sentence: output_limit()
  std::vector<LiveHypothesis> live_, next_live_;
  std::vector<int32_t> tokens_, next_tokens_, parents_, sentence_of_;
  std::vector<float> values_, eos_log_probs_;
  std::vector<int32_t> ids_;
  TopCandidates top_;
};

}  // namespace

std::vector<NBestList> beam_search(StepModel& model, const data::Batch& batch, const BeamSearchOptions& options,
                                   const TokenSink& sink, const SentenceSink& done) {
  if (options.beam_size < 1) fail("--beam-size must be at least 1 (it is {})", options.beam_size);
  std::vector<NBestList> results(batch.size);
  if (batch.size == 0) return results;
  const SentenceSink keep = [&](int s, const NBestList& list) {
    results[s] = list;
    if (done) done(s, results[s]);
  };
  Search search(model, options, sink, keep);
  search.join(batch);
  while (search.running()) search.step();
  return results;  // every sentence was finished at its last step
}

void beam_search_continuous(StepModel& model, const SentenceFeed& feed, const BeamSearchOptions& options,
                            const LineSink& done, const LineTokenSink& tokens) {
  if (!model.can_admit()) fail("internal error: continuous beam search over a model that cannot admit sentences");
  std::vector<int64_t> line_of;  // per sentence number of the current search
  const SentenceSink report = [&](int s, const NBestList& list) { done(line_of[s], list); };
  TokenSink sink;
  if (tokens) sink = [&](int s, int32_t token) { tokens(line_of[s], token); };
  Search search(model, options, sink, report);
  // A sentence fits when its longest output still fits the caches: bos and limit tokens from this step on.
  const std::function<bool(int)> fits = [&](int source_tokens) {
    return output_limit(source_tokens, options.max_length_factor, options.max_new_tokens, options.max_context) + 1 <=
           model.steps_left();
  };
  // Sentences join while their full beams fit beside the live sentences' remaining ones (Search::row_bound) and
  // while sentence places are free; one encoding brings at most max_sentences(). Where the model has more places
  // than one batch, sentences whose beams narrowed as hypotheses finished make room for more sentences, so that the
  // steps keep the rows they were planned for.
  const int beam = options.beam_size;
  const int batch = model.max_sentences();
  const int places = std::max(batch, model.max_live_sentences());
  const int rows = model.max_hypotheses() > 0 ? model.max_hypotheses() : places * beam;
  const int unit = admission_batch(batch);
  data::Batch chunk;
  bool blocked = false;  // the feed's next sentence does not fit this search's caches any more
  while (true) {
    if (!search.running()) {
      // A new search (the caches from their first position on: every sentence fits), or the end.
      if (!feed(std::max(1, std::min(batch, rows / beam)), nullptr, chunk) || chunk.size == 0) return;
      line_of.assign(chunk.line_ids.begin(), chunk.line_ids.end());
      search.join(chunk);
      blocked = false;
    }
    search.step();
    // Free places are filled once there are enough of them to be worth an encoding, in multiples of
    // admission_batch() so that the encodings repeat a few shapes and replay; a search whose caches cannot take the
    // next sentence runs out and starts again.
    const int free = std::min({places - search.live_sentences(), (rows - search.row_bound()) / beam, batch});
    const int room = free / unit * unit;
    if (!blocked && search.running() && room > 0) {
      blocked = feed(room, fits, chunk) && chunk.size == 0;
      if (chunk.size > 0) {
        line_of.insert(line_of.end(), chunk.line_ids.begin(), chunk.line_ids.end());
        search.join(chunk);
      }
    }
  }
}

int admission_batch(int max_sentences) { return std::max(1, max_sentences / 8); }

}  // namespace lseq
