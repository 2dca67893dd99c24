#include "vocabularies.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

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
  if (!in) fail("cannot read the vocabulary '{}'", path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// A --vocabs path must be a file, or a new file in an existing directory (lstrain trains it there).
void check_vocab_path(const std::string& path) {
  std::error_code ec;
  const std::string extension = fs::path(path).extension().string();
  if (extension == ".json") {  // GPT-2's byte-level BPE (vocab.json, merges.txt beside it): read, never trained
    if (fs::is_regular_file(path, ec)) return;
    fail("--vocabs '{}' does not exist: lseq reads GPT-2 byte-level BPE tokenizers (vocab.json with merges.txt "
         "beside it) but does not train them; give an existing vocab.json, or a path ending in .spm (lstrain "
         "creates a SentencePiece model there from the training data)",
         path);
  }
  if (extension == ".yml" || extension == ".yaml") {
    fail("--vocabs '{}' is a Marian vocabulary (a word list), which lseq does not read: lseq uses SentencePiece "
         "models; give a path ending in .spm (lstrain creates it from the training data when it does not exist)",
         path);
  }
  if (fs::is_directory(path, ec)) {
    fail("--vocabs '{}' is a directory; give the path of a SentencePiece model file (e.g. '{}/vocab.spm'), which "
         "lstrain trains from the corpus when it does not exist",
         path, path);
  }
  if (fs::exists(path, ec)) return;
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec)) {
    fail("--vocabs '{}': the directory '{}' does not exist; create it, or give a path in an existing directory "
         "(lstrain trains the vocabulary there)",
         path, parent.string());
  }
}

struct Loaded {
  std::unique_ptr<data::Vocab> vocab;
  std::string bytes;
};

Loaded load(const std::string& path) {
  Loaded v;
  v.vocab = std::make_unique<data::Vocab>(data::Vocab::load(path));
  v.bytes = read_file(path);
  return v;
}

// Trains into `path`, or (for the model directory's own copy) into a temporary file that is read and removed.
Loaded train_and_load(const std::vector<std::string>& corpus, const std::string& path, bool temporary,
                      const data::VocabTrainOptions& options) {
  if (!temporary) {
    data::Vocab::train(corpus, path, options);
    return load(path);
  }
  const std::string scratch =
      (fs::temp_directory_path() / fmt::format("lseq-vocab-{}.spm", static_cast<long>(::getpid()))).string();
  data::Vocab::train(corpus, scratch, options);
  Loaded v;
  try {
    v = load(scratch);
  } catch (...) {
    std::error_code ec;
    fs::remove(scratch, ec);
    throw;
  }
  std::error_code ec;
  fs::remove(scratch, ec);
  return v;
}

}  // namespace

std::vector<std::string> Vocabularies::identities() const {
  return {src->fingerprint(), target().fingerprint()};
}

Vocabularies prepare_vocabularies(const Options& options, const ModelDir& dir,
                                  const std::vector<std::string>& train_sets, bool use_copies) {
  std::vector<std::string> paths = options.get_strings("vocabs");
  const bool given = !paths.empty();
  if (paths.size() > 2) fail("--vocabs takes one (joint) or two (source, target) paths, got {}", paths.size());
  for (const std::string& path : paths) check_vocab_path(path);
  std::error_code ec;
  if (!given) {
    const bool separate = fs::exists(dir.file("vocab.src.spm"), ec) && fs::exists(dir.file("vocab.tgt.spm"), ec);
    const bool bpe = !fs::exists(dir.file("vocab.spm"), ec) && fs::exists(dir.file("vocab.json"), ec);
    paths = use_copies && separate ? std::vector<std::string>{dir.file("vocab.src.spm"), dir.file("vocab.tgt.spm")}
            : use_copies && bpe    ? std::vector<std::string>{dir.file("vocab.json")}
                                   : std::vector<std::string>{dir.file("vocab.spm")};
  }
  if (paths.size() == 2 && paths[0] != paths[1] &&
      (data::Vocab::is_bpe_path(paths[0]) || data::Vocab::is_bpe_path(paths[1])))
    fail("--vocabs: a GPT-2 byte-level BPE tokenizer (vocab.json) is one joint vocabulary; give it once");
  if (paths.size() == 1) paths.push_back(paths.front());
  std::vector<int64_t> sizes = options.get_ints("dim-vocabs");
  if (sizes.empty()) sizes = {8000};
  if (sizes.size() == 1) sizes.push_back(sizes.front());

  data::VocabTrainOptions train;
  train.max_lines = options.get_int("sentencepiece-max-lines");
  train.seed = static_cast<uint64_t>(options.get_int("seed"));
  train.extra_options = options.get_string("sentencepiece-options");
  // The model directory's copy is reused unless --no-reload discards it; a new one is only written at the start.
  const auto usable = [&](const std::string& path) { return (given || use_copies) && fs::exists(path, ec); };

  Vocabularies v;
  v.given = given;
  v.src_path = paths[0];
  v.tgt_path = paths[1];
  if (v.joint()) {
    Loaded joint;
    if (usable(v.src_path)) {
      joint = load(v.src_path);
    } else {
      train.vocab_size = static_cast<int>(sizes[0]);
      std::string sources;
      for (const std::string& set : train_sets) sources += (sources.empty() ? "" : " and ") + set;
      spdlog::info("creating joint vocabulary {} ({} pieces) from {}", v.src_path, train.vocab_size, sources);
      joint = train_and_load(train_sets, v.src_path, !given, train);
    }
    v.src = std::move(joint.vocab);
    v.src_bytes = std::move(joint.bytes);
  } else {
    if (train_sets.size() < 2) fail("--vocabs names two vocabularies but --train-sets has one file: give one path");
    for (int side = 0; side < 2; ++side) {
      const std::string& path = side == 0 ? v.src_path : v.tgt_path;
      Loaded one;
      if (usable(path)) {
        one = load(path);
      } else {
        train.vocab_size = static_cast<int>(sizes[side]);
        spdlog::info("creating vocabulary {} ({} pieces) from {}", path, train.vocab_size, train_sets[side]);
        one = train_and_load({train_sets[side]}, path, !given, train);
      }
      (side == 0 ? v.src : v.tgt) = std::move(one.vocab);
      (side == 0 ? v.src_bytes : v.tgt_bytes) = std::move(one.bytes);
    }
  }
  return v;
}

void check_checkpoint_vocabularies(const Vocabularies& vocabs, const TrainingProgress& progress,
                                   const ModelDir& dir) {
  if (progress.vocabs.empty()) {
    spdlog::warn("the checkpoint in '{}' predates stored vocabulary identities: make sure --vocabs names the "
                 "vocabularies it was trained with",
                 dir.path());
    return;
  }
  const std::vector<std::string> ours = vocabs.identities();
  for (int side = 0; side < 2; ++side) {
    if (ours[side] == progress.vocabs[side]) continue;
    const std::string& path = side == 0 ? vocabs.src_path : vocabs.tgt_path;
    fail("the checkpoint in '{}' was trained with another {} vocabulary than '{}' ({}); give --vocabs the "
         "vocabularies it was trained with (the model directory keeps copies), train into another --model, or "
         "start afresh with --no-reload",
         dir.path(), vocabs.joint() ? "joint" : side == 0 ? "source" : "target", path,
         vocabs.given ? "--vocabs" : "trained anew: the model directory has no copy");
  }
}

void write_vocabulary_copies(const Vocabularies& vocabs, const ModelDir& dir) {
  const auto copy = [&](const std::string& from, const std::string& bytes, const char* name) {
    std::error_code ec;
    if (!fs::equivalent(from, dir.file(name), ec)) write_file_atomic(dir.file(name), bytes);  // not onto itself
  };
  if (vocabs.joint() && vocabs.src->byte_level_bpe()) {  // vocab.json and its merges.txt, by their own names
    copy(vocabs.src_path, vocabs.src_bytes, "vocab.json");
    const std::string merges = data::Vocab::bpe_merges_path(vocabs.src_path);
    copy(merges, read_file(merges), "merges.txt");
  } else if (vocabs.joint()) {
    copy(vocabs.src_path, vocabs.src_bytes, "vocab.spm");
  } else {
    copy(vocabs.src_path, vocabs.src_bytes, "vocab.src.spm");
    copy(vocabs.tgt_path, vocabs.tgt_bytes, "vocab.tgt.spm");
  }
}

}  // namespace lseq
