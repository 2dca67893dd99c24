#pragma once
// --pretrained-model (Marian's option): a new training run starts from the weights of another model instead of
// random ones: a model lstrain trained, or one a converter wrote (tools/gpt2, tools/marian).
#include <string>
#include <vector>

#include "core/model/model_config.h"
#include "core/model/params.h"

namespace lseq {

// The weights file --pretrained-model names: the path itself, or a model directory's model.safetensors.
std::string pretrained_weights_path(const std::string& option_value);

// The first option in which the pretrained model computes otherwise than this run's config, as "key is A in the
// pretrained model but B here"; empty when they describe the same model. Options that only shape training
// (dropout, label smoothing) may differ, and so may max-length where positions are not learned.
std::string architecture_difference(const ModelConfig& pretrained, const ModelConfig& wanted);

// The weights of `path` laid out for `table`, after checking that the stored config describes the model of
// `config` (architecture_difference) and that every tensor is there in its shape; lseq::Error names the file and
// what differs, and what to give instead.
std::vector<float> load_pretrained_weights(const std::string& path, const ParamTable& table,
                                           const ModelConfig& config);

}  // namespace lseq
