#include "core/search/stream_feed.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace lseq {
namespace {

// The taken sentences as one batch, padded to the longest of them.
void fill(const std::vector<std::pair<const data::Batch*, int>>& taken, data::Batch& chunk) {
  chunk.src.assign(static_cast<std::size_t>(chunk.size) * chunk.src_len, data::kPadId);
  for (std::size_t i = 0; i < taken.size(); ++i) {
    const auto& [b, s] = taken[i];
    const int length = b->src_lengths[s];
    std::copy_n(b->src.begin() + static_cast<std::size_t>(s) * b->src_len, length,
                chunk.src.begin() + i * chunk.src_len);
    chunk.src_lengths.push_back(length);
    chunk.line_ids.push_back(b->line_ids[s]);
  }
}

int64_t sentences_in(const std::vector<data::Batch>& batches) {
  int64_t n = 0;
  for (const data::Batch& b : batches) n += b.size;
  return n;
}

}  // namespace

bool StreamFeed::next(int max_sentences, const std::function<bool(int)>& fits, data::Batch& chunk) {
  while (true) {
    {
      std::lock_guard<std::mutex> lock(feed_mutex_);
      chunk = data::Batch{};
      if (stopped_) return false;
      if (take_locked(max_sentences, fits, chunk)) return true;
      if (input_done_) return false;
    }
    // Nothing attached is left: the reader's next window. A search with live sentences does not wait for it (its
    // steps go on; it asks again after the next one).
    if (!attach_next(!fits)) return false;
  }
}

void StreamFeed::skip_taken_locked(std::size_t& window, std::size_t& batch, int& sentence) const {
  while (window < attached_.size()) {
    const std::vector<data::Batch>& batches = attached_[window];
    if (batch >= batches.size()) {
      ++window, batch = 0, sentence = 0;
    } else if (sentence >= batches[batch].size) {
      ++batch, sentence = 0;
    } else {
      return;
    }
  }
}

bool StreamFeed::take_locked(int max_sentences, const std::function<bool(int)>& fits, data::Batch& chunk) {
  std::vector<std::pair<const data::Batch*, int>> taken;
  std::size_t window = 0, batch = batch_;
  int sentence = sentence_;
  bool blocked = false;
  for (skip_taken_locked(window, batch, sentence); window < attached_.size() && chunk.size < max_sentences;
       skip_taken_locked(window, batch, sentence)) {
    const data::Batch& b = attached_[window][batch];
    if (fits && !fits(source_tokens_without_eos(b, sentence))) {
      blocked = true;
      break;
    }
    taken.emplace_back(&b, sentence);
    chunk.src_len = std::max(chunk.src_len, b.src_lengths[sentence]);
    ++chunk.size, ++sentence;
  }
  fill(taken, chunk);
  // Windows fed in full leave (after the copies out of them): attached_ holds only windows with sentences left.
  for (; window > 0; --window) attached_.pop_front();
  batch_ = batch, sentence_ = sentence;
  return chunk.size > 0 || blocked;
}

bool StreamFeed::attach_next(bool wait) {
  std::unique_lock<std::mutex> attaching(attach_mutex_, std::defer_lock);
  if (wait) {
    attaching.lock();
  } else if (!attaching.try_lock()) {
    return false;  // another decoder is taking a window
  }
  {
    std::lock_guard<std::mutex> lock(feed_mutex_);
    if (stopped_ || input_done_ || !attached_.empty()) return true;  // attached meanwhile: take from it
  }
  data::InputWindow window;
  bool got = false;
  if (wait) {
    const auto begin = std::chrono::steady_clock::now();
    got = windows_.pop(window);
    input_wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  } else {
    const auto taken = windows_.try_pop(window);
    if (taken == BoundedQueue<data::InputWindow>::Taken::none_yet) return false;
    got = taken == BoundedQueue<data::InputWindow>::Taken::item;
  }
  if (!got) {
    std::lock_guard<std::mutex> lock(feed_mutex_);
    input_done_ = true;
    return true;
  }
  // Its lines that are not decoded go to the writer now; its end once its decoded lines have followed.
  const int64_t decoded = sentences_in(window.batches);
  const std::size_t empty = window.empty_lines.size();
  bool writing = hand_over_({std::move(window.empty_lines), std::vector<NBestList>(empty)});
  {
    std::lock_guard<std::mutex> lock(done_mutex_);
    open_.push_back({window.end_line, decoded});
    writing = writing && hand_over_finished_windows_locked();
  }
  std::lock_guard<std::mutex> lock(feed_mutex_);
  if (!writing) stopped_ = true;
  batches_attached_ += static_cast<int64_t>(window.batches.size());
  if (decoded > 0) attached_.push_back(std::move(window.batches));
  return true;
}

bool StreamFeed::hand_over(SearchedLines lines) {
  const std::vector<int64_t> ids = lines.line_ids;
  bool writing = hand_over_(std::move(lines));
  {
    std::lock_guard<std::mutex> lock(done_mutex_);
    for (int64_t line : ids) {
      // Windows cover consecutive line ranges: the first whose end lies past the line holds it.
      auto it = std::find_if(open_.begin(), open_.end(), [&](const OpenWindow& w) { return line < w.end_line; });
      if (it != open_.end()) --it->unfinished;
    }
    writing = writing && hand_over_finished_windows_locked();
  }
  if (!writing) stop();
  return writing;
}

bool StreamFeed::hand_over_finished_windows_locked() {
  // In order, under done_mutex_: the writer counts lines up to the last window end it was given.
  while (!open_.empty() && open_.front().unfinished == 0) {
    if (!hand_over_({{}, {}, open_.front().end_line})) return false;
    open_.pop_front();
  }
  return true;
}

void StreamFeed::stop() {
  std::lock_guard<std::mutex> lock(feed_mutex_);
  stopped_ = true;
}

double StreamFeed::input_wait_seconds() const {
  std::lock_guard<std::mutex> lock(attach_mutex_);
  return input_wait_seconds_;
}

}  // namespace lseq
