#pragma once
// One accepted translation request while it is served: its sentences' results arrive from the decoding thread in
// any order; the HTTP thread that holds the connection waits for them (or for the deadline, or for the client to
// go away) and then takes them to write the answer. Sentences that were not decoded (too long, failed) carry an
// error instead. A request given up (time-out, client gone) is taken early and its waiting sentences are removed
// from the scheduler (Scheduler::cancel); results of its sentences already being decoded are dropped.
// A streaming request (a language model's "stream": true) also receives each sentence's tokens as they are chosen
// (append_token), and its HTTP thread wakes on each (wait_for_news) to send them on.
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "core/search/search_types.h"
#include "core/search/translator.h"

namespace lseq::serve {

using Clock = std::chrono::steady_clock;

class PendingRequest {
 public:
  // `sentences` results are expected; `settings` is how they are searched and written (n-best, word scores).
  PendingRequest(int sentences, TranslateSettings settings, Clock::time_point arrival, bool streaming = false);

  int size() const { return count_; }
  const TranslateSettings& settings() const { return settings_; }
  bool streaming() const { return streaming_; }
  Clock::time_point arrival() const { return arrival_; }

  // The decoding thread (or the HTTP thread, for sentences it answers itself: empty, too long). Each index is
  // set once; a result that comes after take() is dropped.
  void set_result(int index, NBestList list);
  void set_error(int index, std::string message);

  enum class Outcome { done, timed_out, disconnected };
  // Waits until every sentence has a result or an error, `deadline` passes, or `connected()` (asked every `poll`)
  // says the client went away.
  Outcome wait(Clock::time_point deadline, const std::function<bool()>& connected, Clock::duration poll);

  // Streaming: the decoding thread adds a sentence's next token (its eos is not kept); nothing unless streaming.
  void append_token(int index, int32_t token);
  // Waits as wait() does, but returns `done` also as soon as anything changed since the change count `seen` (a
  // token or a result arrived), and sets `seen` to the count it saw.
  Outcome wait_for_news(Clock::time_point deadline, const std::function<bool()>& connected, Clock::duration poll,
                        uint64_t& seen);
  // Each sentence's tokens so far, and whether it is done (a result or an error arrived).
  struct Progress {
    std::vector<std::vector<int32_t>> tokens;
    std::vector<bool> done;
    bool all_done = false;
  };
  Progress progress() const;

  struct Entry {
    bool done = false;  // a result or an error arrived
    NBestList list;
    std::string error;  // non-empty: the sentence has no translation
  };
  // The entries as they are now; sentences not done by then stay so, and later results are dropped.
  std::vector<Entry> take();

 private:
  TranslateSettings settings_;
  Clock::time_point arrival_;
  int count_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Entry> entries_;
  int remaining_ = 0;
  bool taken_ = false;
  bool streaming_ = false;
  std::vector<std::vector<int32_t>> streamed_;  // streaming: each sentence's tokens so far
  uint64_t changes_ = 0;                        // tokens and results that arrived
};

}  // namespace lseq::serve
