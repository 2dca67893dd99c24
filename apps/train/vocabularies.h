#pragma once
// lstrain's vocabularies: given with --vocabs, or trained from the training corpus when the path does not exist
// yet (Marian's behaviour), and copied into the model directory so that lstranslate --model needs nothing else.
#include <memory>
#include <string>
#include <vector>

#include "core/checkpoint/checkpoint.h"
#include "core/cli/options.h"
#include "data/vocab.h"

namespace lseq {

struct Vocabularies {
  std::string src_path, tgt_path;
  std::unique_ptr<data::Vocab> src, tgt;  // tgt aliases src when joint (tgt_shared)
  bool joint() const { return src_path == tgt_path; }
  const data::Vocab& target() const { return joint() ? *src : *tgt; }
};

// --vocabs: one path or the same path twice -> a joint vocabulary; two paths -> one per side. Paths that do not
// exist are trained from `train_sets`; the model directory keeps copies (vocab.spm, or vocab.src.spm and
// vocab.tgt.spm).
Vocabularies prepare_vocabularies(const Options& options, const ModelDir& dir,
                                  const std::vector<std::string>& train_sets);

}  // namespace lseq
