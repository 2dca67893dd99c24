#pragma once
// Checkpoint weights in the safetensors format (Hugging Face), so numpy / PyTorch can load them:
//   8-byte little-endian header length N | N bytes of JSON, space-padded to a multiple of 8 |
//   raw little-endian tensor data, contiguous, in the order the tensors were written.
// The JSON maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data
// area) and "__metadata__" to a string->string map.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace lseq {

// Bytes per element of a safetensors dtype ("F32", "F16", "BF16", "I32", "I64"); throws lseq::Error otherwise.
std::size_t safetensors_dtype_size(const std::string& dtype);

// One tensor to write; data is not owned and holds product(shape) elements (may be null when that is 0).
struct SafetensorsInput {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;  // {} is a scalar (one element)
  const void* data = nullptr;
};

// Writes the tensors (in the given order) and metadata atomically (util/atomic_file.h), streaming each tensor's
// data straight from its buffer. Throws lseq::Error for an unknown dtype, a duplicate or reserved name, or a
// negative dimension, and for any I/O failure.
void write_safetensors(const std::string& path, const std::vector<SafetensorsInput>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// A tensor inside an opened file. data points into the file's mapping (valid while the SafetensorsFile lives) and
// is only as aligned as the file makes it: copy with memcpy rather than casting when alignment matters.
struct SafetensorsTensor {
  std::string dtype;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  std::size_t bytes = 0;
};

// A safetensors file mapped read-only and validated completely on open.
class SafetensorsFile {
 public:
  // Throws lseq::Error "checkpoint '<path>' is corrupt or truncated: <what>; ..." (one line) for any defect, or
  // "cannot read checkpoint '<path>': <OS error>" when it cannot be opened.
  // read_all: read the whole file in now (for a caller about to read every tensor) rather than page by page as
  // tensors are touched (for one that only wants the header, like the model config).
  static SafetensorsFile open(const std::string& path, bool read_all = false);

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Tensor names in the order of their data in the file (the order they were written).
  const std::vector<std::string>& names() const { return names_; }
  // The tensor, or nullptr when the file has none of that name.
  const SafetensorsTensor* find(const std::string& name) const;
  // The tensor, which must exist with exactly this dtype and shape; otherwise throws lseq::Error naming the
  // tensor, the file, and the expected and found dtype/shape.
  const SafetensorsTensor& require(const std::string& name, const std::string& dtype,
                                   const std::vector<std::int64_t>& shape) const;

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<const Mapping> mapping_;
  std::map<std::string, std::string> metadata_;
  std::vector<std::string> names_;
  std::map<std::string, SafetensorsTensor> tensors_;
};

}  // namespace lseq
