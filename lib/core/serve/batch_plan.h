#pragma once
// How lsserve cuts pooled sentences into batches: sorted by length, then split where it saves the most, in the
// spirit of TurboTransformers' dynamic-programming batch scheduler. A batch of n sentences whose longest source has
// L tokens (eos included) costs L * (n + fixed_cost): a decoding step's work grows with the rows it computes, plus a
// part that does not (launches, the host's share of a step), counted in rows; the steps grow with the length. The
// plan minimises the summed cost of all batches under the limits; with fixed_cost 0 it would batch only equal
// lengths together, a large one makes few, full batches of mixed lengths.
#include <cstdint>
#include <vector>

namespace lseq::serve {

struct BatchLimits {
  int max_sentences = 64;    // --mini-batch (0: no limit)
  int64_t max_tokens = 0;    // --mini-batch-words: sentences x longest source, eos included (0: no limit)
  double fixed_cost = 16;    // --batch-fixed-cost, in rows
};

double batch_cost(int longest, int sentences, double fixed_cost);

// `sorted_lengths`: source lengths (eos included, each >= 1) in ascending order. Returns where each batch ends:
// batch b holds sentences [ends[b-1], ends[b]) (ends[-1] = 0; the last end is the count). A single sentence always
// makes a batch, even one over max_tokens. Runs in O(count x max_sentences), or O(count^2) without that limit.
std::vector<int> plan_batches(const std::vector<int>& sorted_lengths, const BatchLimits& limits);

}  // namespace lseq::serve
