#pragma once
// A SentenceFeed over a list of sources for continuous-batching tests, as lstranslate's window feed hands them out:
// in order, as many as asked and as fit.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/search/beam_search.h"
#include "data/batch.h"
#include "data/translation_input.h"

namespace lseq::test {

// Source ids (without eos) of each sentence of `batch`.
inline std::vector<std::vector<int32_t>> sentences_of(const data::Batch& batch) {
  std::vector<std::vector<int32_t>> out;
  for (int s = 0; s < batch.size; ++s) {
    const auto begin = batch.src.begin() + static_cast<std::ptrdiff_t>(s) * batch.src_len;
    out.emplace_back(begin, begin + batch.src_lengths[s] - 1);
  }
  return out;
}

// Sentence i has line id i; `next` counts those handed out.
inline SentenceFeed feed_of(const std::vector<std::vector<int32_t>>& sources, std::size_t& next) {
  return [&sources, &next](int max_sentences, const std::function<bool(int)>& fits, data::Batch& chunk) {
    chunk = data::Batch{};
    if (next >= sources.size()) return false;
    std::vector<std::vector<int32_t>> taken;
    std::vector<int64_t> lines;
    while (next < sources.size() && static_cast<int>(taken.size()) < max_sentences &&
           (!fits || fits(static_cast<int>(sources[next].size())))) {
      lines.push_back(static_cast<int64_t>(next));
      taken.push_back(sources[next++]);
    }
    if (!taken.empty()) chunk = data::make_source_batch(taken, lines);
    return true;
  };
}

}  // namespace lseq::test
