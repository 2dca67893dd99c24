#pragma once
// Marian compatibility of the options: Marian's presets (--task), Marian's spellings that lseq maps onto its own
// (a model file path, --models, --fp16, two --precision values), the warnings of options accepted with no effect
// and the refusals of options lseq does not implement (both declared in the registry), and the table of
// docs/marian-compat.md, generated from the registry and Marian's option names.
#include <iosfwd>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/cli/options.h"

namespace lseq {

// The options of Marian's --task presets (transformer-base, transformer-big, -prenorm variants), in the canonical
// form Options stores; later presets win. lseq::Error for an unknown preset.
YAML::Node task_preset_layer(App app, const std::vector<std::string>& tasks);

// Applies Marian's spellings to the merged options and checks the registry's Marian notes: a refused option or
// value throws lseq::Error (one line); an option with no effect here writes one "warning: ..." line to `err`.
void apply_marian_compat(App app, Options& options, std::ostream& err);

// Marian's option names by program (from Marian's src/common/config_parser.cpp): training, decoding.
const std::vector<std::string>& marian_training_options();
const std::vector<std::string>& marian_decoder_options();

// docs/marian-compat.md: what lstrain and lstranslate do with each of Marian's options.
std::string marian_compat_markdown();

}  // namespace lseq
