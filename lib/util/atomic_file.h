#pragma once
// Crash-safe file replacement: the data goes to a temporary file in the target's directory, is flushed to disk,
// and is renamed over the target; the directory is then flushed so the rename itself survives a power cut.
// A crash at any instant leaves either the old file or the complete new one, never a partial file.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace lseq {

// One piece of a file to write, not owned (e.g. one tensor's data).
struct ConstBuffer {
  const void* data = nullptr;
  std::size_t size = 0;
};

// Appends bytes to the file being written; given to the producer of write_file_atomic_streamed.
using ChunkSink = std::function<void(const void* data, std::size_t size)>;

// Replaces path with bytes. Throws lseq::Error naming the path and the OS error; on failure no temporary file is
// left behind and an existing file at path is untouched.
void write_file_atomic(const std::string& path, std::string_view bytes);

// Same, with the file's content given as pieces written in order (nothing is concatenated in memory).
void write_file_atomic(const std::string& path, const std::vector<ConstBuffer>& pieces);

// Same, with the content produced by a callback that calls sink as often as it likes. If produce throws, the
// temporary file is removed and the exception propagates unchanged.
void write_file_atomic_streamed(const std::string& path, const std::function<void(const ChunkSink& sink)>& produce);

}  // namespace lseq
