#pragma once
// The single point where a model directory becomes a StepModel on the backend the options choose.
#include <memory>

#include "core/checkpoint/model_files.h"
#include "core/cli/options.h"
#include "core/search/step_model.h"

namespace lseq {

// Loads the model in `files` onto the backend the options choose (--cpu, --devices, --precision, --cpu-threads,
// --workspace) and returns its incremental step model, planned once for the largest batch the options allow.
std::unique_ptr<StepModel> load_step_model(const ModelFiles& files, const Options& options);

}  // namespace lseq
