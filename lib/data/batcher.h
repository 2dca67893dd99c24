#pragma once
// Training batches: the encoded corpus (from the binary cache, memory-mapped) is cut into length-sorted,
// token-budgeted mini-batches, deterministically from a seed, with a state that can be saved and restored
// exactly, a rank/world split for data parallelism, and a background thread that prepares batches ahead.
// A language model's corpus may instead be cut into blocks (block_length, data/lm_blocks.h): each batch is then
// mini_batch_words / block_length whole blocks (at least one), in an order shuffled per epoch.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batch.h"

namespace lseq::data {

struct BatcherOptions {
  int64_t mini_batch_words = 4096;  // --mini-batch-words: budget of padded tokens per side (max of both sides)
  int mini_batch = 0;               // --mini-batch: at most this many sentences a batch (0: no limit)
  int maxi_batch = 100;             // --maxi-batch: sort windows of maxi_batch * (sentences per mini-batch)
  bool shuffle = true;              // shuffle sentences and batch order per epoch (false: corpus order)
  bool shuffle_batches_only = false;  // with shuffle: read sentences in corpus order, shuffle only the batches
                                      // (Marian's --shuffle batches)
  bool sort_by_length = true;       // sort each maxi-batch window by length (false: only to measure padding)
  uint64_t seed = 1234;
  int rank = 0, world_size = 1;     // data parallelism: the global stream of batches (the same for every world
                                    // size with the same update_batches) is handed out in rounds of world_size
                                    // consecutive batches, rank r taking the r-th of each round; a round may reach
                                    // into the next epoch. So a world of W with batch B trains on what one rank
                                    // with --optimizer-delay W does, and every rank makes the same number of steps.
  int64_t update_batches = 1;       // batches of one update over all ranks (world_size x --optimizer-delay): the
                                    // epoch's shuffle keeps runs of this many neighbouring batches of a sorted
                                    // window together, aligned with the updates, so that the ranks of a round get
                                    // batches of about the same shape and reach the gradient exchange together
                                    // (1: every batch shuffled on its own).
  int prefetch = 8;                 // batches prepared ahead by the background thread (0: none)
  int block_length = 0;             // > 0: language-model blocks of this many tokens (--lm-pack-blocks: --max-length)
  bool document_masks = false;      // blocks: batches carry doc_starts (--lm-document-masks)
};

// Where the iterator is: enough to continue exactly. Stored in progress.yml by the trainer.
struct BatcherState {
  int64_t epoch = 1;          // 1-based, as Marian reports it
  int64_t batch_in_epoch = 0; // global batches of this epoch already handed out (all ranks); the same on every
                              // rank after the same number of next() calls. A position in the global stream, so
                              // it means the same for any world size: a run resumed on another number of devices
                              // continues with the next global batch, none skipped and none repeated.
  // How this epoch's batch order was shuffled: runs of `group` neighbouring batches kept together, the first whole
  // run starting at batch `phase` (the batches before it finish an update that began in the previous epoch). Saved
  // with the position, so that a run resumed with another update_batches finishes the epoch in the same order.
  int64_t group = 1, phase = 0;
};

class EncodedCorpus;  // corpus_cache.h

// Not thread-safe: one thread calls next()/state()/restore(); the prefetch thread is internal.
class Batcher {
 public:
  Batcher(std::shared_ptr<const EncodedCorpus> corpus, BatcherOptions options);
  ~Batcher();

  // The next batch of this rank; at the end of an epoch the next epoch starts (state().epoch increments).
  Batch next();
  BatcherState state() const;          // the state after the last batch returned by next()
  void restore(const BatcherState& s); // the next call to next() continues from s

  bool epoch_finished() const;  // true right after the round of next() took the last batch of an epoch (on every rank)
  // Global batches (all ranks) in the given epoch; plans the epoch (cheap: a sort of lengths) if needed.
  int64_t batches_in_epoch(int64_t epoch) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lseq::data
