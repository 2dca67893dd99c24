#pragma once
// Continuous batching over a whole input (translate_all): the windows the reader makes are fed to every decoder's
// continuous search one after another, so that the searches never drain at a window's end (each drain ran a tail
// in which only the window's longest outputs were left), and decoding starts as soon as the first window is read.
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <vector>

#include "core/search/bounded_queue.h"
#include "core/search/search_types.h"
#include "data/batch.h"
#include "data/translation_input.h"

namespace lseq {

// What the search hands the writer: the n-best lists of some input lines (empty lists for a window's lines that are
// not decoded), or the end of a window (window_end >= 0: all lines before it have been handed over).
struct SearchedLines {
  std::vector<int64_t> line_ids;
  std::vector<NBestList> lists;
  int64_t window_end = -1;
};

// Queues lines for the writer; false once the writer failed.
using HandOver = std::function<bool(SearchedLines)>;

class StreamFeed {
 public:
  StreamFeed(BoundedQueue<data::InputWindow>& windows, HandOver hand_over)
      : windows_(windows), hand_over_(std::move(hand_over)) {}

  // A SentenceFeed (beam_search_continuous): the next sentences in window order. For a new search (no `fits`) it
  // waits for the reader's next window when none is left; for an admission it does not wait (false: ask again).
  // False for a new search: the input is exhausted, or stop() was called.
  bool next(int max_sentences, const std::function<bool(int)>& fits, data::Batch& chunk);
  // Hands a decoder's finished lines to the writer, then each window's end once every line of it (and of the
  // windows before it) has been handed over. False once the writer failed (the feed then stops).
  bool hand_over(SearchedLines lines);
  void stop();  // no more sentences for anyone (an error, or the writer failed)
  // How long decoders with nothing to decode waited for the reader (a wait for the first window included).
  double input_wait_seconds() const;
  // The batches of the windows attached so far (any thread): what the input is known to hold at least.
  int64_t batches_attached() const { return batches_attached_.load(std::memory_order_relaxed); }

 private:
  struct OpenWindow {
    int64_t end_line;
    int64_t unfinished;  // its decoded lines not yet handed over
  };
  // Takes up to max_sentences from the attached windows; true when it took some or met one that does not fit.
  bool take_locked(int max_sentences, const std::function<bool(int)>& fits, data::Batch& chunk);
  // Moves a position in attached_ past the batches and windows whose sentences were all taken.
  void skip_taken_locked(std::size_t& window, std::size_t& batch, int& sentence) const;
  // Attaches the reader's next window (waiting for it if `wait`); false when none is ready without waiting.
  bool attach_next(bool wait);
  bool hand_over_finished_windows_locked();

  BoundedQueue<data::InputWindow>& windows_;
  HandOver hand_over_;

  std::mutex feed_mutex_;  // the attached windows' sentences
  std::deque<std::vector<data::Batch>> attached_;  // windows with sentences left to take
  std::size_t batch_ = 0;  // in attached_.front()
  int sentence_ = 0;       // in that batch
  bool input_done_ = false, stopped_ = false;

  mutable std::mutex attach_mutex_;  // one decoder at a time takes a window from the reader, so windows attach in order
  double input_wait_seconds_ = 0;

  std::atomic<int64_t> batches_attached_{0};

  std::mutex done_mutex_;  // windows whose end has not been handed over, in order
  std::deque<OpenWindow> open_;
};

}  // namespace lseq
