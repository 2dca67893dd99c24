#pragma once
// How lsserve cuts pooled sentences into batches: sorted by length, then split where it saves the most, in the
// spirit of TurboTransformers' dynamic-programming batch scheduler. A batch of n sentences whose longest source has
// L tokens (eos included) costs L * (n + fixed_cost): a decoding step's work grows with the rows it computes, plus a
// part that does not (launches, the host's share of a step), counted in sentences; the steps grow with the length.
// The plan minimises the summed cost of all batches under the limits; with fixed_cost 0 it would batch only equal
// lengths together, a large one makes few, full batches of mixed lengths.
//
// The default is large because on a GPU the part that does not grow dominates: on an H100, transformer-base steps
// of beam 4 took 0.33, 0.37 and 0.41 ms at 32, 64 and 128 sentences (bench_decode_throughput), about 300
// sentences' worth of fixed cost; and the hypotheses that finish leave the batch, so mixing lengths costs less than
// L * n says. On an H200, lsserve with 1000 against 16 (the old default) served 67k against 66k target tokens/s at
// saturation, and at 250 requests/s answered with p50/p99 14.6/30.0 ms against 17.7/46.6 ms (2026-11-26).
#include <cstdint>
#include <vector>

namespace lseq::serve {

struct BatchLimits {
  int max_sentences = 64;    // --mini-batch (0: no limit)
  int64_t max_tokens = 0;    // --mini-batch-words: sentences x longest source, eos included (0: no limit)
  double fixed_cost = 1000;  // --batch-fixed-cost, in sentences
};

double batch_cost(int longest, int sentences, double fixed_cost);

// `sorted_lengths`: source lengths (eos included, each >= 1) in ascending order. Returns where each batch ends:
// batch b holds sentences [ends[b-1], ends[b]) (ends[-1] = 0; the last end is the count). A single sentence always
// makes a batch, even one over max_tokens. Runs in O(count x max_sentences), or O(count^2) without that limit.
std::vector<int> plan_batches(const std::vector<int>& sorted_lengths, const BatchLimits& limits);

}  // namespace lseq::serve
