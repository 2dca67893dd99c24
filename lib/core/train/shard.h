#pragma once
// The shards of the flat parameter buffer under --sharding (ZeRO stage 1): [0, size) cut into `ranks` contiguous
// ranges of nearly equal length, each starting at a multiple of kParamAlignment elements so that the vectorised
// optimizer kernels may start anywhere in a shard (the last ones may be shorter, or empty for tiny models).
// Returns ranks + 1 offsets, as kernels::Communicator's ranges take them.
#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/model/params.h"

namespace lseq {

inline std::vector<std::size_t> shard_offsets(std::size_t size, int ranks) {
  const std::size_t r = static_cast<std::size_t>(std::max(ranks, 1));
  std::size_t chunk = (size + r - 1) / r;
  chunk = (chunk + kParamAlignment - 1) / kParamAlignment * kParamAlignment;
  std::vector<std::size_t> offsets(r + 1);
  for (std::size_t i = 0; i <= r; ++i) offsets[i] = std::min(size, i * chunk);
  return offsets;
}

}  // namespace lseq
