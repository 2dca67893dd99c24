#include "vocabularies.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/atomic_file.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lseq {

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

// --vocabs: one path or the same path twice -> a joint vocabulary; two paths -> one per side. Paths that do not
// exist are trained from the training corpus (Marian's behaviour); the model directory keeps copies so that
// lstranslate --model needs nothing else.
Vocabularies prepare_vocabularies(const Options& options, const ModelDir& dir,
                                  const std::vector<std::string>& train_sets) {
  std::vector<std::string> paths = options.get_strings("vocabs");
  if (paths.empty()) paths = {dir.file("vocab.spm")};
  if (paths.size() > 2) fail("--vocabs takes one (joint) or two (source, target) paths, got {}", paths.size());
  if (paths.size() == 1) paths.push_back(paths.front());
  std::vector<int64_t> sizes = options.get_ints("dim-vocabs");
  if (sizes.empty()) sizes = {8000};
  if (sizes.size() == 1) sizes.push_back(sizes.front());

  data::VocabTrainOptions train;
  train.max_lines = options.get_int("sentencepiece-max-lines");
  train.seed = static_cast<uint64_t>(options.get_int("seed"));
  train.extra_options = options.get_string("sentencepiece-options");

  Vocabularies v;
  v.src_path = paths[0];
  v.tgt_path = paths[1];
  if (v.joint()) {
    if (!fs::exists(v.src_path)) {
      train.vocab_size = static_cast<int>(sizes[0]);
      spdlog::info("creating joint vocabulary {} ({} pieces) from {} and {}", v.src_path, train.vocab_size,
                   train_sets[0], train_sets[1]);
      data::Vocab::train(train_sets, v.src_path, train);
    }
    v.src = std::make_unique<data::Vocab>(data::Vocab::load(v.src_path));
    write_file_atomic(dir.file("vocab.spm"), read_file(v.src_path));
  } else {
    for (int side = 0; side < 2; ++side) {
      const std::string& path = side == 0 ? v.src_path : v.tgt_path;
      if (!fs::exists(path)) {
        train.vocab_size = static_cast<int>(sizes[side]);
        spdlog::info("creating vocabulary {} ({} pieces) from {}", path, train.vocab_size, train_sets[side]);
        data::Vocab::train({train_sets[side]}, path, train);
      }
      auto vocab = std::make_unique<data::Vocab>(data::Vocab::load(path));
      write_file_atomic(dir.file(side == 0 ? "vocab.src.spm" : "vocab.tgt.spm"), read_file(path));
      (side == 0 ? v.src : v.tgt) = std::move(vocab);
    }
  }
  return v;
}

}  // namespace lseq
