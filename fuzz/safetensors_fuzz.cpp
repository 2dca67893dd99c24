// Weights and optimizer files (model.safetensors, checkpoint/*/optimizer.safetensors): SafetensorsFile::open of
// the input as a file, then what the programs do with weights: read_model_config and load_weights into the
// parameter table of the model the seed files hold (fuzz/corpus/safetensors/model.safetensors).
// Promises checked: a refusal is one line; in an accepted file the tensors tile the data area in the order names()
// gives, each holds exactly product(shape) elements of its dtype inside the file, and find/require return them.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.h"
#include "core/checkpoint/safetensors.h"
#include "core/model/encoder_decoder_model.h"
#include "kernels/backend.h"
#include "fuzz_support.h"

namespace {

std::unique_ptr<lseq::kernels::Backend> backend;
std::unique_ptr<lseq::EncoderDecoderModel> model;

uint64_t header_length(const uint8_t* data) {
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{data[i]} << (8 * i);
  return n;
}

void check_file(const lseq::SafetensorsFile& file, const uint8_t* data, size_t size) {
  LSEQ_FUZZ_EXPECT(size >= 8 && header_length(data) <= size - 8, "a file with an impossible header was accepted");
  const uint64_t data_area = size - 8 - header_length(data);
  uint64_t position = 0;
  const unsigned char* previous_end = nullptr;
  unsigned checksum = 0;
  for (const auto& name : file.names()) {
    const lseq::SafetensorsTensor* tensor = file.find(name);
    LSEQ_FUZZ_EXPECT(tensor != nullptr, "names() lists a tensor that find() does not know: " + name);
    // The bytes the shape needs, in 128 bits: 2^62 elements (the loader's limit) of 8 bytes overflow 64.
    unsigned __int128 needed = lseq::safetensors_dtype_size(tensor->dtype);
    for (int64_t d : tensor->shape) needed *= static_cast<uint64_t>(d);
    LSEQ_FUZZ_EXPECT(tensor->bytes == needed, "tensor '" + name + "' holds another number of bytes than its shape");
    const auto* bytes = static_cast<const unsigned char*>(tensor->data);
    LSEQ_FUZZ_EXPECT(previous_end == nullptr || bytes == previous_end, "tensors do not follow each other");
    previous_end = bytes + tensor->bytes;
    position += tensor->bytes;
    for (size_t i = 0; i < tensor->bytes; ++i) checksum += bytes[i];  // ASan: every byte is inside the file
    LSEQ_FUZZ_EXPECT(&file.require(name, tensor->dtype, tensor->shape) == tensor, "require() found another tensor");
  }
  LSEQ_FUZZ_EXPECT(position == data_area, "the tensors do not fill the data area");
  (void)checksum;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lseq::fuzz::quiet_logging();
  const lseq::ModelConfig config =
      lseq::read_model_config(LSEQ_SOURCE_DIR "/fuzz/corpus/safetensors/model.safetensors");
  backend = lseq::kernels::make_cpu_backend(1);
  model = std::make_unique<lseq::EncoderDecoderModel>(config, *backend);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = lseq::fuzz::scratch_file("weights.safetensors");
  lseq::fuzz::write_bytes(path, {reinterpret_cast<const char*>(data), size});
  lseq::fuzz::guarded([&] {
    try {
      check_file(lseq::SafetensorsFile::open(path), data, size);
    } catch (const lseq::Error& e) {  // safetensors.h promises one line whatever names the file holds
      const std::string message = e.what();
      LSEQ_FUZZ_EXPECT(message.find('\n') == std::string::npos, "a refusal of two lines: " + message);
      throw;
    }
  });
  lseq::fuzz::guarded([&] { lseq::read_model_config(path); });
  std::vector<float> flat;
  lseq::fuzz::guarded([&] { lseq::load_weights(path, model->param_store().table(), flat); });
  return 0;
}
