#include "core/serve/scheduler.h"

#include <algorithm>
#include <numeric>

#include "data/translation_input.h"

namespace lseq::serve {

bool same_search(const TranslateSettings& a, const TranslateSettings& b) {
  if (a.sample != b.sample) return false;
  if (!a.sample)
    return a.beam.beam_size == b.beam.beam_size && a.beam.normalize == b.beam.normalize &&
           a.beam.word_penalty == b.beam.word_penalty && a.beam.max_length_factor == b.beam.max_length_factor &&
           a.beam.max_new_tokens == b.beam.max_new_tokens && a.beam.max_context == b.beam.max_context;
  const SamplingOptions &x = a.sampling, &y = b.sampling;
  return x.mode == y.mode && x.top_k == y.top_k && x.top_p == y.top_p && x.temperature == y.temperature &&
         x.seed == y.seed && x.normalize == y.normalize && x.word_penalty == y.word_penalty &&
         x.max_length_factor == y.max_length_factor && x.max_new_tokens == y.max_new_tokens &&
         x.max_context == y.max_context;
}

Scheduler::Scheduler(SchedulerOptions options) : options_(options) {}

Scheduler::Admission Scheduler::submit(const std::shared_ptr<PendingRequest>& request,
                                       std::vector<SentenceToDecode> sentences) {
  if (sentences.empty()) return Admission::accepted;
  std::lock_guard<std::mutex> lock(mutex_);
  if (closed_) return Admission::closed;
  const int count = static_cast<int>(sentences.size());
  if (count > options_.max_queue - waiting_) return Admission::queue_full;
  auto pool = std::find_if(pools_.begin(), pools_.end(),
                           [&](const Pool& p) { return same_search(p.settings, request->settings()); });
  if (pool == pools_.end()) pool = pools_.insert(pools_.end(), Pool{request->settings(), {}});
  const Clock::time_point arrival = request->arrival();
  for (auto& sentence : sentences)
    pool->sentences.push_back(Pooled{request, sentence.index, std::move(sentence.ids), arrival, next_sequence_++});
  waiting_ += count;
  waiting_of_[request.get()] += count;
  ready_.notify_one();
  return Admission::accepted;
}

bool Scheduler::next(ScheduledBatch& out) {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait(lock, [&] { return waiting_ > 0 || closed_; });
  return take_locked(Clock::now(), out);
}

bool Scheduler::take(Clock::time_point now, ScheduledBatch& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  return take_locked(now, out);
}

bool Scheduler::take_locked(Clock::time_point now, ScheduledBatch& out) {
  if (waiting_ == 0) return false;
  const Choice choice = choose(now);
  const Pool& pool = pools_[choice.pool];
  // Longest first, as lstranslate orders a batch (data/translation_input.h).
  std::vector<size_t> members = choice.members;
  std::stable_sort(members.begin(), members.end(), [&](size_t a, size_t b) {
    return pool.sentences[a].ids.size() > pool.sentences[b].ids.size();
  });
  move_out(choice.pool, members, out);
  return true;
}

bool Scheduler::take_joining(const TranslateSettings& settings, int max_sentences,
                             const std::function<bool(int)>& fits, ScheduledBatch& out) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto pool = std::find_if(pools_.begin(), pools_.end(),
                                 [&](const Pool& p) { return same_search(p.settings, settings); });
  if (pool == pools_.end()) return false;
  std::vector<size_t> members;  // in arrival order
  for (size_t i = 0; i < pool->sentences.size() && static_cast<int>(members.size()) < max_sentences; ++i)
    if (fits(static_cast<int>(pool->sentences[i].ids.size()))) members.push_back(i);
  if (members.empty()) return false;
  move_out(static_cast<size_t>(pool - pools_.begin()), members, out);
  return true;
}

void Scheduler::move_out(size_t p, const std::vector<size_t>& members, ScheduledBatch& out) {
  Pool& pool = pools_[p];
  std::vector<std::vector<int32_t>> sources;
  std::vector<int64_t> indices;
  out.settings = pool.settings;
  out.requests.clear();
  out.oldest_arrival = Clock::time_point::max();
  std::vector<bool> taken(pool.sentences.size(), false);
  for (size_t m : members) {
    Pooled& sentence = pool.sentences[m];
    sources.push_back(std::move(sentence.ids));
    indices.push_back(sentence.index);
    out.oldest_arrival = std::min(out.oldest_arrival, sentence.arrival);
    auto count = waiting_of_.find(sentence.request.get());
    if (--count->second == 0) waiting_of_.erase(count);
    out.requests.push_back(std::move(sentence.request));
    taken[m] = true;
  }
  out.batch = data::make_source_batch(sources, indices);
  size_t kept = 0;
  for (size_t i = 0; i < pool.sentences.size(); ++i) {
    if (taken[i]) continue;
    if (kept != i) pool.sentences[kept] = std::move(pool.sentences[i]);  // never a self-move: it would empty it
    ++kept;
  }
  pool.sentences.resize(kept);
  if (pool.sentences.empty()) pools_.erase(pools_.begin() + static_cast<std::ptrdiff_t>(p));
  waiting_ -= static_cast<int>(members.size());
}

Scheduler::Choice Scheduler::choose(Clock::time_point now) const {
  // The oldest sentence: the first of some pool (pools keep arrival order).
  size_t oldest_pool = 0;
  for (size_t p = 1; p < pools_.size(); ++p)
    if (pools_[p].sentences.front().sequence < pools_[oldest_pool].sentences.front().sequence) oldest_pool = p;
  Choice best;
  if (now - pools_[oldest_pool].sentences.front().arrival >= options_.max_wait) {
    plan_pool(oldest_pool, 0, best);
    return best;
  }
  for (size_t p = 0; p < pools_.size(); ++p) plan_pool(p, static_cast<size_t>(-1), best);
  return best;
}

void Scheduler::plan_pool(size_t pool, size_t must_hold, Choice& best) const {
  const std::vector<Pooled>& sentences = pools_[pool].sentences;
  std::vector<size_t> order(sentences.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sentences[a].ids.size() < sentences[b].ids.size(); });
  std::vector<int> lengths(order.size());
  for (size_t i = 0; i < order.size(); ++i) lengths[i] = static_cast<int>(sentences[order[i]].ids.size()) + 1;
  const std::vector<int> ends = plan_batches(lengths, options_.limits);
  int begin = 0;
  for (int end : ends) {
    const std::vector<size_t> members(order.begin() + begin, order.begin() + end);
    if (must_hold != static_cast<size_t>(-1)) {
      if (std::find(members.begin(), members.end(), must_hold) != members.end()) {
        best = Choice{pool, members, 0};
        return;
      }
    } else {
      double tokens = 0;
      for (int i = begin; i < end; ++i) tokens += lengths[static_cast<size_t>(i)];
      const double efficiency = tokens / batch_cost(lengths[static_cast<size_t>(end - 1)], end - begin,
                                                    options_.limits.fixed_cost);
      if (efficiency > best.efficiency) best = Choice{pool, members, efficiency};
    }
    begin = end;
  }
}

int Scheduler::cancel(const PendingRequest& request) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto count = waiting_of_.find(&request);
  if (count == waiting_of_.end()) return 0;
  int removed = 0;
  for (Pool& pool : pools_) {
    auto gone = std::remove_if(pool.sentences.begin(), pool.sentences.end(),
                               [&](const Pooled& p) { return p.request.get() == &request; });
    removed += static_cast<int>(pool.sentences.end() - gone);
    pool.sentences.erase(gone, pool.sentences.end());
  }
  pools_.erase(std::remove_if(pools_.begin(), pools_.end(), [](const Pool& p) { return p.sentences.empty(); }),
               pools_.end());
  waiting_of_.erase(count);
  waiting_ -= removed;
  return removed;
}

void Scheduler::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  ready_.notify_all();
}

int Scheduler::waiting() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return waiting_;
}

int Scheduler::waiting_requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(waiting_of_.size());
}

}  // namespace lseq::serve
