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
  std::string src_path, tgt_path;  // where they come from: --vocabs, or the model directory's copies
  bool given = false;              // by --vocabs
  std::unique_ptr<data::Vocab> src, tgt;  // tgt aliases src when joint (tgt_shared)
  std::string src_bytes, tgt_bytes;       // the SentencePiece model files, for the model directory's copies
  bool joint() const { return src_path == tgt_path; }
  const data::Vocab& target() const { return joint() ? *src : *tgt; }
  // What identifies each vocabulary (source, target) in a checkpoint: a fingerprint of the SentencePiece model.
  std::vector<std::string> identities() const;
};

// --vocabs: one path or the same path twice -> a joint vocabulary; two paths -> one per side. Paths that do not
// exist are trained from `train_sets` (their directory must exist). Without --vocabs the model directory's copies
// (vocab.spm, vocab.src.spm + vocab.tgt.spm, or vocab.json + merges.txt) are used when `use_copies` and they exist; otherwise a joint vocabulary is trained in a temporary file, so that
// nothing in the model directory is written here.
Vocabularies prepare_vocabularies(const Options& options, const ModelDir& dir,
                                  const std::vector<std::string>& train_sets, bool use_copies);

// A checkpoint's vocabularies must be these: else lseq::Error naming --vocabs. Checkpoints older than the stored
// identities pass with a warning.
void check_checkpoint_vocabularies(const Vocabularies& vocabs, const TrainingProgress& progress,
                                   const ModelDir& dir);

// Writes the copies: vocab.spm (joint), or vocab.src.spm and vocab.tgt.spm, or a byte-level BPE's vocab.json and
// merges.txt.
void write_vocabulary_copies(const Vocabularies& vocabs, const ModelDir& dir);

}  // namespace lseq
