// The int32 inputs a decoding step uploads in one copy, laid out alike by both step models
// (encoder_decoder_step_model.cpp, lm/decoder_only_step_model.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace lseq {

// The product of a buffer's dimensions as a size: the model's shapes are ints, their products may not be.
inline std::size_t elems(int64_t a, int64_t b = 1, int64_t c = 1, int64_t d = 1) {
  return static_cast<std::size_t>(a) * static_cast<std::size_t>(b) * static_cast<std::size_t>(c) *
         static_cast<std::size_t>(d);
}

// int32 entries of the step inputs for `rows` computed rows of at most max_hyps: tokens, self-attention lengths,
// key starts and positions at their max_hyps-based offsets, then the cache rows to append to, 2*rows*heads.
inline std::size_t step_input_count(int max_hyps, int heads, int rows) {
  return 4 * elems(max_hyps) + 2 * elems(rows, heads);
}

}  // namespace lseq
