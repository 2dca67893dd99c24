#pragma once
// What lstranslate and lsscore read from a model directory (written by lstrain):
//   model.safetensors              weights; its metadata holds the model config
//   vocab.spm                      one joint SentencePiece vocabulary, or
//   vocab.src.spm + vocab.tgt.spm  source and target vocabularies, or
//   vocab.json + merges.txt        one joint GPT-2 byte-level BPE tokenizer
//   decoder.yml                    optional defaults for decoding options (beam-size, normalize, ...), read by
//                                  parse_options as the lowest config layer (Marian's name for that file)
#include <string>

namespace lseq {

struct ModelFiles {
  std::string dir;
  std::string weights;         // dir/model.safetensors (must exist)
  std::string source_vocab;    // empty when the directory has none
  std::string target_vocab;    // empty when the directory has none
  std::string decoder_config;  // empty when the directory has no decoder.yml
};

// Throws lseq::Error naming the directory when it or its model.safetensors is missing, or when it has only one of
// vocab.src.spm / vocab.tgt.spm.
ModelFiles find_model_files(const std::string& dir);

}  // namespace lseq
