#pragma once
// Where a batch's positions lie in a [rows, dim] activation. Padded: sentence b's position i < len at row
// b*len + i. Packed (padding-free): at row offsets[b] + i for i below its length, offsets a device array of
// batch + 1 entries, so the row-wise ops (GEMMs, LayerNorm, feed-forward) skip the padding. Training packs the
// source side when the batch allows (EncoderDecoderModel::run): a WMT-like batch sorted by target length pads about a
// fifth of its source rows.
#include <cstdint>

namespace lseq {

struct PackedRows {
  const int32_t* offsets = nullptr;  // [batch + 1] device; null: padded
  const int32_t* index = nullptr;    // [rows] device: each packed row's padded row (b*len + i)
  int rows = 0;                      // packed rows in all (offsets[batch])

  bool packed() const { return offsets != nullptr; }
  int count(int batch, int len) const { return offsets ? rows : batch * len; }
};

}  // namespace lseq
