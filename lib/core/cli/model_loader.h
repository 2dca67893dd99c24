#pragma once
// The single point where a model directory becomes a StepModel on the backend the options choose.
#include <memory>

#include "core/checkpoint/model_files.h"
#include "core/cli/options.h"
#include "core/search/step_model.h"
#include "data/vocab.h"

namespace lseq {

// The vocabulary sizes a model was trained with (its config, stored in the weights).
struct ModelVocabSizes {
  int source = 0, target = 0;
};

// Reads the model's vocabulary sizes and checks the directory's vocabularies against them (nullptr where it has
// none): a vocabulary of another size would decode into the wrong ids, so it throws lseq::Error naming the file,
// its size and the model's.
ModelVocabSizes check_model_vocabs(const ModelFiles& files, const data::Vocab* source, const data::Vocab* target);

// Loads the model in `files` onto the backend the options choose (--cpu, --devices, --precision, --cpu-threads,
// --workspace) and returns its incremental step model, planned once for the largest batch the options allow.
std::unique_ptr<StepModel> load_step_model(const ModelFiles& files, const Options& options);

}  // namespace lseq
