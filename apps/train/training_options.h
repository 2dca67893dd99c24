#pragma once
// lstrain's options turned into what the libraries take: the model's config, the trainer's schedule and the
// optimizer's settings. Each refuses what this version cannot do with a message naming the option.
#include "core/cli/options.h"
#include "core/model/model_config.h"
#include "core/train/optimizer.h"
#include "core/train/trainer.h"
#include "vocabularies.h"

namespace lseq {

ModelConfig model_config_from(const Options& options, const Vocabularies& vocabs);
TrainerOptions trainer_options(const Options& options);
OptimizerOptions optimizer_options(const Options& options);

}  // namespace lseq
