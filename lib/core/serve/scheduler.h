#pragma once
// Between the HTTP threads and the one decoding thread: sentences of every waiting request are pooled, and each
// time the decoder is free it takes one batch of them:
//   - requests whose search differs (beam size, normalisation, word penalty, sampling) are pooled apart, since
//     one batch runs one search; a batch never mixes them;
//   - within a pool, the sentences are sorted by length and cut by plan_batches (batch_plan.h): least padding
//     for the fixed cost of a batch, under the sentence limit and the token budget;
//   - the batch taken is the plan's most efficient one (real source tokens per unit of cost), over all pools, so
//     that a thin batch may wait for company; but once a sentence has waited max_wait, the batch holding the
//     oldest sentence goes first (so small requests are not starved by a stream of large ones, and no sentence
//     waits more than max_wait plus the batches ahead of it);
//   - the decoder never idles while a sentence waits: next() returns a batch whenever the pool is not empty;
//   - a decoder that searches continuously (beam_search_continuous) takes more sentences of its search while it
//     runs (take_joining), oldest first.
// The pool is bounded (max_queue sentences; submit refuses what does not fit). Cancelled requests' sentences are
// removed (cancel) or skipped.
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/serve/batch_plan.h"
#include "core/serve/pending_request.h"
#include "data/batch.h"

namespace lseq::serve {

struct SchedulerOptions {
  BatchLimits limits;
  int max_queue = 4096;                                  // sentences waiting (--max-queue)
  Clock::duration max_wait = std::chrono::milliseconds(20);  // --max-wait-ms
};

// True when two requests' sentences may share a batch: the same search (n-best and word scores only change how the
// result is written).
bool same_search(const TranslateSettings& a, const TranslateSettings& b);

// One sentence to decode: its request and its index there, and its ids (without eos).
struct SentenceToDecode {
  int index = 0;
  std::vector<int32_t> ids;
};

struct ScheduledBatch {
  TranslateSettings settings;  // the search of every sentence in it
  data::Batch batch;           // sources padded; line_ids[i] = the sentence's index in its request (sampling streams)
  std::vector<std::shared_ptr<PendingRequest>> requests;  // requests[i]: the owner of sentence i
  Clock::time_point oldest_arrival;                       // of the sentences in it
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions options);

  enum class Admission { accepted, queue_full, closed };
  // Adds the request's sentences, all or none: queue_full when they do not fit beside the waiting ones (a request of
  // more than max_queue sentences never fits), closed after close().
  Admission submit(const std::shared_ptr<PendingRequest>& request, std::vector<SentenceToDecode> sentences);

  // Blocks until a batch can be taken (true) or the scheduler is closed and empty (false).
  bool next(ScheduledBatch& out);
  // The same without waiting: false when nothing waits. `now` decides who waited max_wait.
  bool take(Clock::time_point now, ScheduledBatch& out);

  // Continuous batching: sentences to join a running search of `settings` (same_search), without waiting. Takes up
  // to max_sentences of that search's waiting sentences, oldest first, skipping those that fits (source tokens
  // without eos) refuses; they stay for a later batch. False when none was taken.
  bool take_joining(const TranslateSettings& settings, int max_sentences, const std::function<bool(int)>& fits,
                    ScheduledBatch& out);

  // Removes the request's waiting sentences (it must be cancelled first); returns how many.
  int cancel(const PendingRequest& request);

  // No more submits; next() returns what waits, then false.
  void close();

  int waiting() const;           // sentences
  int waiting_requests() const;  // requests with a sentence waiting

 private:
  struct Pooled {
    std::shared_ptr<PendingRequest> request;
    int index = 0;
    std::vector<int32_t> ids;
    Clock::time_point arrival;
    uint64_t sequence = 0;  // arrival order
  };
  struct Pool {
    TranslateSettings settings;
    std::vector<Pooled> sentences;  // in arrival order
  };
  struct Choice {
    size_t pool = 0;
    std::vector<size_t> members;  // indices into the pool's sentences
    double efficiency = -1;
  };

  bool take_locked(Clock::time_point now, ScheduledBatch& out);
  // Moves the members (indices into the pool's sentences, in batch order) out of pool p into `out`.
  void move_out(size_t p, const std::vector<size_t>& members, ScheduledBatch& out);
  Choice choose(Clock::time_point now) const;
  // The plan of one pool: the batch holding sentence `must_hold` (when it is not npos), else its most efficient
  // batch if it beats `best`.
  void plan_pool(size_t pool, size_t must_hold, Choice& best) const;

  SchedulerOptions options_;
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<Pool> pools_;
  std::unordered_map<const PendingRequest*, int> waiting_of_;  // sentences waiting per request
  int waiting_ = 0;
  uint64_t next_sequence_ = 0;
  bool closed_ = false;
};

}  // namespace lseq::serve
