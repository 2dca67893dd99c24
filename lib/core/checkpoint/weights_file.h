#pragma once
// Weights files (model.safetensors, the best-* copies, each checkpoint's weights): one F32 tensor per parameter,
// named as in the table, with the model config as YAML under the metadata key "lseq.model_config".
#include <cstdint>
#include <string>
#include <vector>

#include "core/model/model_config.h"
#include "core/model/params.h"

namespace lseq {

class SafetensorsFile;

void save_weights(const std::string& path, const ParamTable& table, const ModelConfig& config,
                  const std::vector<float>& flat, int64_t updates);
// Fills flat (sized to the table) from a weights file. The file's tensors must be exactly the table's, in its shapes,
// with finite values; otherwise lseq::Error naming the file and the first offending tensor.
void load_weights(const std::string& path, const ParamTable& table, std::vector<float>& flat);
// The same from a file already open (and so read in: SafetensorsFile::open maps it populated), which a loader may
// open beside other start-up work.
void load_weights(const SafetensorsFile& file, const ParamTable& table, std::vector<float>& flat);
// The table's tensors as views into the file (valid while it is open), checked as load_weights checks them.
std::vector<HostTensor> weight_tensors(const SafetensorsFile& file, const ParamTable& table);
// The model config stored in a weights file.
ModelConfig read_model_config(const std::string& weights_path);

// Throws lseq::Error naming the file and the tensor when values[0 .. count) holds a NaN or an infinity.
void require_finite(const std::string& path, const std::string& tensor, const float* values, std::size_t count);

}  // namespace lseq
