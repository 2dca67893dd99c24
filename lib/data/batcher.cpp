#include "data/batcher.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "data/corpus_cache.h"
#include "data/lm_blocks.h"
#include "data/vocab.h"
#include "util/error.h"
#include "util/splitmix64.h"

namespace lseq::data {

int64_t Batch::src_tokens() const {
  int64_t n = 0;
  for (int32_t l : src_lengths) n += l;
  return n;
}

int64_t Batch::tgt_tokens() const {
  int64_t n = 0;
  for (int32_t l : tgt_lengths) n += l;
  return n;
}

struct Batcher::Impl {
  // One epoch's batches: spans of a sentence order that is shuffled, then sorted by length within windows.
  struct Plan {
    int64_t epoch = 0, group = 1, phase = 0;  // BatcherState's layout of the batch order
    std::vector<uint32_t> order;
    struct Span {
      uint64_t start;
      uint32_t count;
    };
    std::vector<Span> batches;  // in hand-out order; the same for every world size
  };

  struct Item {
    Batch batch;
    BatcherState state;
    bool epoch_end = false;
    std::exception_ptr error;
  };

  std::shared_ptr<const EncodedCorpus> corpus;
  BatcherOptions options;
  int src_side = 0, tgt_side = 1;  // a monolingual corpus has only a target side (src_side = -1)
  int64_t window = 1;              // sentences sorted together
  std::shared_ptr<const LmBlocks> blocks;  // block mode: the plan's order holds block numbers

  // Only the producer (the worker thread while it runs, else the caller) touches plan and cursor.
  mutable Plan plan;
  BatcherState cursor;  // where the producer continues

  BatcherState state;  // after the last batch handed out
  bool finished = false;

  std::mutex mutex;
  std::condition_variable not_full, not_empty;
  std::deque<Item> queue;
  bool stop = false;
  std::thread worker;

  // Where the last restore() put the position: an update boundary of that epoch.
  BatcherState restored;

  const Plan& plan_for(int64_t epoch, int64_t group, int64_t phase) const;
  const Plan& plan_for(const BatcherState& s) const { return plan_for(s.epoch, s.group, s.phase); }
  // The layout of the epoch after `s`'s, which has `total` batches: runs aligned with the updates.
  int64_t next_phase(const BatcherState& s, int64_t total) const;
  void cut_window(Plan& p, uint64_t begin, uint64_t end) const;
  void cut_blocks(Plan& p) const;
  Item produce();
  void fill(const Plan::Span& span, Batch& b) const;
  void fill_blocks(const Plan::Span& span, Batch& b) const;
  void start_worker();
  void stop_worker();
};

// Shuffles the batches in runs of `group` neighbours (the batches before `phase` and the last incomplete run stay
// where they are, so that every run lines up with one update); group 1 is a plain shuffle of the batches.
template <class T>
void shuffle_runs(std::vector<T>& batches, int64_t group, int64_t phase, SplitMix64& rng) {
  if (group <= 1) {
    shuffle_in_place(batches.data(), batches.size(), rng);
    return;
  }
  const std::size_t n = batches.size(), g = static_cast<std::size_t>(group);
  const std::size_t head = std::min(n, static_cast<std::size_t>(phase)), runs = (n - head) / g;
  std::vector<std::size_t> order(runs);
  for (std::size_t r = 0; r < runs; ++r) order[r] = r;
  shuffle_in_place(order.data(), runs, rng);
  std::vector<T> out(batches.begin(), batches.begin() + static_cast<std::ptrdiff_t>(head));
  out.reserve(n);
  for (std::size_t r : order) {
    const auto first = batches.begin() + static_cast<std::ptrdiff_t>(head + r * g);
    out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(g));
  }
  out.insert(out.end(), batches.begin() + static_cast<std::ptrdiff_t>(head + runs * g), batches.end());
  batches.swap(out);
}

const Batcher::Impl::Plan& Batcher::Impl::plan_for(int64_t epoch, int64_t group, int64_t phase) const {
  if (plan.epoch == epoch && plan.group == group && plan.phase == phase && !plan.batches.empty()) return plan;
  const auto n = static_cast<uint64_t>(blocks ? blocks->count() : corpus->size());
  Plan p;
  p.epoch = epoch;
  p.group = group;
  p.phase = phase;
  p.order.resize(n);
  for (uint64_t i = 0; i < n; ++i) p.order[i] = static_cast<uint32_t>(i);
  if (options.shuffle && !options.shuffle_batches_only) {
    SplitMix64 rng(mix_seed(options.seed, static_cast<uint64_t>(epoch), 1));
    shuffle_in_place(p.order.data(), n, rng);
  }
  if (blocks) {
    cut_blocks(p);
  } else {
    for (uint64_t begin = 0; begin < n; begin += static_cast<uint64_t>(window))
      cut_window(p, begin, std::min(n, begin + static_cast<uint64_t>(window)));
  }

  // A round of the ranks takes world_size consecutive batches and may reach into the next epoch, but not past it.
  if (p.batches.size() < static_cast<std::size_t>(options.world_size))
    fail("the corpus gives only {} batches an epoch ({} sentence pairs), too few for one batch on each of the {} "
         "ranks; use a larger corpus, smaller batches or fewer devices", p.batches.size(), n, options.world_size);
  if (options.shuffle) {
    SplitMix64 rng(mix_seed(options.seed, static_cast<uint64_t>(epoch), 2));
    shuffle_runs(p.batches, group, phase, rng);
  }
  plan = std::move(p);
  return plan;
}

int64_t Batcher::Impl::next_phase(const BatcherState& s, int64_t total) const {
  // Updates take update_batches global batches each, so their boundaries in s's epoch lie on one grid: the run
  // starts of its layout, or, where a resumed run changed update_batches, the position it resumed from (a
  // checkpoint is written between updates). The next epoch's first whole update starts where that grid goes on.
  const int64_t g = options.update_batches;
  const bool resumed_here = restored.epoch == s.epoch && s.group != g;
  const int64_t boundary = resumed_here ? restored.batch_in_epoch : s.phase;
  return ((boundary - total) % g + g) % g;
}

// Sorts order[begin, end) by (target, source) length and cuts it into batches within the token budget.
void Batcher::Impl::cut_window(Plan& p, uint64_t begin, uint64_t end) const {
  const uint32_t* src = src_side >= 0 ? corpus->lengths(src_side) : nullptr;
  const uint32_t* tgt = corpus->lengths(tgt_side);
  uint32_t* order = p.order.data();
  if (options.sort_by_length) {
    // Stable counting sorts by source length, then by target length: O(n) for the small integer keys, and ties
    // keep the (seeded) shuffled order, so the result is deterministic.
    const std::size_t n = end - begin;
    std::vector<uint32_t> buffer(n), count;
    auto pass = [&](const uint32_t* len, const uint32_t* from, uint32_t* to) {
      uint32_t longest = 0;
      for (std::size_t i = 0; i < n; ++i) longest = std::max(longest, std::min<uint32_t>(len[from[i]], 0xFFFF));
      count.assign(longest + 2, 0);
      for (std::size_t i = 0; i < n; ++i) ++count[std::min<uint32_t>(len[from[i]], 0xFFFF) + 1];
      for (std::size_t l = 1; l < count.size(); ++l) count[l] += count[l - 1];
      for (std::size_t i = 0; i < n; ++i) to[count[std::min<uint32_t>(len[from[i]], 0xFFFF)]++] = from[i];
    };
    if (src) {
      pass(src, order + begin, buffer.data());
      pass(tgt, buffer.data(), order + begin);
    } else {
      pass(tgt, order + begin, buffer.data());
      std::copy(buffer.begin(), buffer.end(), order + begin);
    }
  }
  const int64_t budget = options.mini_batch_words;
  uint64_t start = begin;
  int64_t count = 0, longest = 0;  // padded length of the open batch (bos/eos included, max of both sides)
  for (uint64_t i = begin; i < end; ++i) {
    const uint32_t k = order[i];
    const int64_t len = std::max<int64_t>(src ? src[k] + 1 : 0, tgt[k] + 1);
    const int64_t new_longest = std::max(longest, len);
    const bool over = (count + 1) * new_longest > budget || (options.mini_batch > 0 && count + 1 > options.mini_batch);
    if (count > 0 && over) {
      p.batches.push_back({start, static_cast<uint32_t>(count)});
      start = i, count = 0, longest = len;
    } else {
      longest = new_longest;
    }
    ++count;
  }
  if (count > 0) p.batches.push_back({start, static_cast<uint32_t>(count)});
}

// Blocks: as many whole blocks a batch as the token budget holds (at least one), within --mini-batch.
void Batcher::Impl::cut_blocks(Plan& p) const {
  int64_t per_batch = std::max<int64_t>(1, options.mini_batch_words / blocks->length());
  if (options.mini_batch > 0) per_batch = std::min<int64_t>(per_batch, options.mini_batch);
  const auto n = static_cast<uint64_t>(p.order.size());
  for (uint64_t start = 0; start < n; start += static_cast<uint64_t>(per_batch))
    p.batches.push_back({start, static_cast<uint32_t>(std::min<uint64_t>(per_batch, n - start))});
}

void Batcher::Impl::fill_blocks(const Plan::Span& span, Batch& b) const {
  const uint32_t* idx = plan.order.data() + span.start;
  const int n = static_cast<int>(span.count);
  const int64_t length = blocks->length();
  b.size = n;
  b.src_len = 0;
  b.tgt_len = 0;
  for (int r = 0; r < n; ++r)
    b.tgt_len = std::max(b.tgt_len, static_cast<int>(std::min(length, blocks->pairs() - idx[r] * length)));
  const std::size_t T = static_cast<std::size_t>(b.tgt_len);
  b.src.clear();
  b.src_lengths.clear();
  b.tgt_in.assign(n * T, kPadId);
  b.tgt_out.assign(n * T, kPadId);
  b.doc_starts.assign(options.document_masks ? n * T : 0, 0);
  b.tgt_lengths.resize(n);
  b.line_ids.resize(n);
  for (int r = 0; r < n; ++r) {
    b.tgt_lengths[r] = blocks->fill(idx[r], b.tgt_len, b.tgt_in.data() + r * T, b.tgt_out.data() + r * T,
                                    options.document_masks ? b.doc_starts.data() + r * T : nullptr, &b.line_ids[r]);
  }
}

// The hot path: lengths are precomputed, each row is one span copy (memcpy or a widening loop), no per-token work
// beyond that and no allocation except the batch's own arrays.
void Batcher::Impl::fill(const Plan::Span& span, Batch& b) const {
  if (blocks) return fill_blocks(span, b);
  const uint32_t* idx = plan.order.data() + span.start;
  const int n = static_cast<int>(span.count);
  const uint32_t* src_len = src_side >= 0 ? corpus->lengths(src_side) : nullptr;
  const uint32_t* tgt_len = corpus->lengths(tgt_side);
  uint32_t max_src = 0, max_tgt = 0;
  for (int r = 0; r < n; ++r) {
    if (src_len) max_src = std::max(max_src, src_len[idx[r]]);
    max_tgt = std::max(max_tgt, tgt_len[idx[r]]);
    corpus->prefetch_meta(idx[r]);
  }
  b.size = n;
  b.src_len = src_len ? static_cast<int>(max_src) + 1 : 0;
  b.tgt_len = static_cast<int>(max_tgt) + 1;
  const std::size_t S = static_cast<std::size_t>(b.src_len), T = static_cast<std::size_t>(b.tgt_len);
  b.src.assign(n * S, kPadId);
  b.tgt_in.assign(n * T, kPadId);
  b.tgt_out.assign(n * T, kPadId);
  b.src_lengths.resize(src_len ? n : 0);
  b.tgt_lengths.resize(n);
  b.line_ids.resize(n);
  constexpr int kAhead = 8;  // rows whose tokens are requested before they are copied (hides memory latency)
  for (int r = 0; r < std::min(n, kAhead); ++r) corpus->prefetch_tokens(idx[r]);
  for (int r = 0; r < n; ++r) {
    const uint32_t k = idx[r];
    if (r + kAhead < n) corpus->prefetch_tokens(idx[r + kAhead]);
    if (src_len) {
      int32_t* row = b.src.data() + r * S;
      const uint32_t l = src_len[k];
      corpus->copy_tokens(src_side, k, row);
      row[l] = kEosId;
      b.src_lengths[r] = static_cast<int32_t>(l + 1);
    }
    const uint32_t l = tgt_len[k];
    int32_t* out = b.tgt_out.data() + r * T;
    int32_t* in = b.tgt_in.data() + r * T;
    corpus->copy_tokens(tgt_side, k, out);
    in[0] = kBosId;
    std::memcpy(in + 1, out, l * sizeof(int32_t));
    out[l] = kEosId;
    b.tgt_lengths[r] = static_cast<int32_t>(l + 1);
    b.line_ids[r] = corpus->line(k);
  }
}

// One round of the ranks: the world_size global batches from the cursor on (continuing into the next epoch where
// this one ends); this rank takes the rank-th. Every rank moves its cursor past the whole round, so all ranks keep
// the same state, and a world of W sees the global stream of one rank with --optimizer-delay W.
Batcher::Impl::Item Batcher::Impl::produce() {
  int64_t total = static_cast<int64_t>(plan_for(cursor).batches.size());
  auto next_epoch = [&](int64_t batch_in_epoch) {
    BatcherState s;
    s.epoch = cursor.epoch + 1;
    s.batch_in_epoch = batch_in_epoch;
    s.group = options.update_batches;
    s.phase = next_phase(cursor, total);
    return s;
  };
  if (cursor.batch_in_epoch >= total) {
    cursor = next_epoch(0);
    total = static_cast<int64_t>(plan_for(cursor).batches.size());
  }
  const int64_t world = options.world_size;
  const int64_t mine = cursor.batch_in_epoch + options.rank;
  Item item;
  item.epoch_end = cursor.batch_in_epoch + world >= total;  // the round takes this epoch's last batch
  if (mine < total) {
    fill(plan_for(cursor).batches[static_cast<std::size_t>(mine)], item.batch);
  } else {
    const Plan& next = plan_for(next_epoch(0));
    if (mine - total >= static_cast<int64_t>(next.batches.size()))
      fail("internal error: a round of {} ranks reaches past the next epoch", world);
    fill(next.batches[static_cast<std::size_t>(mine - total)], item.batch);
  }
  if (cursor.batch_in_epoch + world > total) {  // the round ends inside the next epoch
    cursor = next_epoch(cursor.batch_in_epoch + world - total);
  } else {
    cursor.batch_in_epoch += world;  // may end exactly at the epoch's end: the next round moves on
  }
  item.state = cursor;
  return item;
}

void Batcher::Impl::start_worker() {
  stop = false;
  cursor = state;
  worker = std::thread([this] {
    for (;;) {
      Item item;
      try {
        item = produce();
      } catch (...) {
        item.error = std::current_exception();
      }
      const bool failed = item.error != nullptr;
      std::unique_lock<std::mutex> lock(mutex);
      not_full.wait(lock, [&] { return stop || queue.size() < static_cast<std::size_t>(options.prefetch); });
      if (stop) return;
      queue.push_back(std::move(item));
      not_empty.notify_one();
      if (failed) return;
    }
  });
}

void Batcher::Impl::stop_worker() {
  if (!worker.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex);
    stop = true;
  }
  not_full.notify_all();
  worker.join();
  queue.clear();
}

Batcher::Batcher(std::shared_ptr<const EncodedCorpus> corpus, BatcherOptions options)
    : impl_(std::make_unique<Impl>()) {
  if (!corpus) fail("the batcher needs a corpus");
  if (corpus->size() == 0) fail("the training corpus has no sentence pairs left after filtering");
  if (corpus->size() > static_cast<int64_t>(UINT32_MAX)) fail("the corpus has more than 2^32 pairs; split it");
  if (corpus->streams() > 2) fail("the batcher takes 1 (monolingual) or 2 (parallel) corpus files");
  if (options.mini_batch_words <= 0) fail("--mini-batch-words must be positive (got {})", options.mini_batch_words);
  if (options.mini_batch < 0) fail("--mini-batch must not be negative (got {})", options.mini_batch);
  if (options.maxi_batch < 1) fail("--maxi-batch must be at least 1 (got {})", options.maxi_batch);
  if (options.prefetch < 0) fail("the batch prefetch must not be negative (got {})", options.prefetch);
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size)
    fail("rank {} is outside the world of {} ranks", options.rank, options.world_size);
  if (options.update_batches < 1) fail("internal error: updates of {} batches", options.update_batches);
  auto& d = *impl_;
  d.corpus = std::move(corpus);
  d.options = options;
  d.state.group = options.update_batches;  // a fresh start lays out its first epoch for its own updates
  d.restored = d.state;
  if (d.corpus->streams() == 1) d.src_side = -1, d.tgt_side = 0;
  if (options.block_length > 0) {
    d.blocks = std::make_shared<LmBlocks>(*d.corpus, options.block_length);
    if (d.blocks->count() > static_cast<int64_t>(UINT32_MAX)) fail("the corpus has more than 2^32 blocks; split it");
    return;  // no length sorting: the sort window does not apply
  }
  if (options.document_masks) fail("internal error: document masks without language-model blocks");

  // Sentences per mini-batch, estimated from the mean padded length, sets the sorting window.
  const int64_t n = d.corpus->size();
  const uint32_t* tgt = d.corpus->lengths(d.tgt_side);
  const uint32_t* src = d.src_side >= 0 ? d.corpus->lengths(d.src_side) : nullptr;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::max<uint32_t>(src ? src[i] + 1 : 0, tgt[i] + 1);
  int64_t per_batch = std::max<int64_t>(1, static_cast<int64_t>(options.mini_batch_words / (sum / n)));
  if (options.mini_batch > 0) per_batch = std::min<int64_t>(per_batch, options.mini_batch);
  d.window = per_batch * options.maxi_batch;
}

Batcher::~Batcher() { impl_->stop_worker(); }

Batch Batcher::next() {
  auto& d = *impl_;
  Impl::Item item;
  if (d.options.prefetch == 0) {
    d.cursor = d.state;
    item = d.produce();
  } else {
    if (!d.worker.joinable()) d.start_worker();
    {
      std::unique_lock<std::mutex> lock(d.mutex);
      d.not_empty.wait(lock, [&] { return !d.queue.empty(); });
      item = std::move(d.queue.front());
      d.queue.pop_front();
    }
    d.not_full.notify_one();
    if (item.error) {
      d.worker.join();  // it stopped after reporting the error
      d.queue.clear();
      std::rethrow_exception(item.error);
    }
  }
  d.state = item.state;
  d.finished = item.epoch_end;
  return std::move(item.batch);
}

BatcherState Batcher::state() const { return impl_->state; }

void Batcher::restore(const BatcherState& s) {
  if (s.epoch < 1 || s.batch_in_epoch < 0 || s.group < 1 || s.phase < 0 || s.phase >= s.group)
    fail("invalid batcher state (epoch {}, batch {}, runs of {} from {}); the progress file is damaged", s.epoch,
         s.batch_in_epoch, s.group, s.phase);
  impl_->stop_worker();
  impl_->state = s;
  impl_->restored = s;
  impl_->finished = false;
}

bool Batcher::epoch_finished() const { return impl_->finished; }

int64_t Batcher::batches_in_epoch(int64_t epoch) const {
  // The count does not depend on the order's layout: the cached plan where it is this epoch's.
  auto& d = *impl_;
  if (d.worker.joinable()) {  // the worker owns the cached plan: plan a copy
    Impl copy;
    copy.corpus = d.corpus;
    copy.options = d.options;
    copy.src_side = d.src_side, copy.tgt_side = d.tgt_side, copy.window = d.window;
    copy.blocks = d.blocks;
    return static_cast<int64_t>(copy.plan_for(epoch, 1, 0).batches.size());
  }
  if (d.plan.epoch == epoch && !d.plan.batches.empty()) return static_cast<int64_t>(d.plan.batches.size());
  return static_cast<int64_t>(d.plan_for(epoch, 1, 0).batches.size());
}

}  // namespace lseq::data
