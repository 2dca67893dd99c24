// The model directory's layout as lstranslate and lsscore read it (model_files.h).
#include "core/checkpoint/model_files.h"

#include <filesystem>

#include "util/error.h"

namespace lseq {

namespace fs = std::filesystem;

ModelFiles find_model_files(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    fail("model directory '{}' not found; --model must name a directory written by lstrain", dir);
  ModelFiles files;
  files.dir = dir;
  auto in_dir = [&](const char* name) { return (fs::path(dir) / name).string(); };
  // A Hugging Face model directory (config.json beside model.safetensors or pytorch_model.bin) is not an lseq
  // directory: the converters in tools/ write one from it.
  if (fs::exists(in_dir("config.json"), ec) && !fs::exists(in_dir("config.yml"), ec)) {
    fail("model directory '{}' holds a Hugging Face checkpoint (config.json); convert it into an lseq model "
         "directory first: python3 tools/gpt2/gpt2_to_lseq.py (GPT-2) or tools/marian/marianmt_to_lseq.py "
         "(MarianMT)",
         dir);
  }
  files.weights = in_dir("model.safetensors");
  if (!fs::exists(files.weights, ec))
    fail("model directory '{}' has no model.safetensors; train a model into it with lstrain first", dir);
  const std::string joint = in_dir("vocab.spm"), src = in_dir("vocab.src.spm"), tgt = in_dir("vocab.tgt.spm");
  const bool has_src = fs::exists(src, ec), has_tgt = fs::exists(tgt, ec);
  if (has_src != has_tgt)
    fail("model directory '{}' has {} but not {}; both vocabularies are needed", dir, has_src ? src : tgt,
         has_src ? tgt : src);
  if (has_src) {
    files.source_vocab = src;
    files.target_vocab = tgt;
  } else if (fs::exists(joint, ec)) {
    files.source_vocab = files.target_vocab = joint;
  } else if (fs::exists(in_dir("vocab.json"), ec)) {  // a GPT-2 byte-level BPE, merges.txt beside it
    files.source_vocab = files.target_vocab = in_dir("vocab.json");
  }
  if (fs::exists(in_dir("decoder.yml"), ec)) files.decoder_config = in_dir("decoder.yml");
  return files;
}

}  // namespace lseq
