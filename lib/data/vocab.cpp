#include "data/vocab.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <cctype>
#include <thread>
#include <unordered_map>


#include "data/byte_level_bpe.h"
#include "data/corpus_reader.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/splitmix64.h"

namespace lseq::data {

namespace fs = std::filesystem;

namespace {

// Feeds the sampled lines to the SentencePiece trainer without writing them to a file.
class SampleIterator : public sentencepiece::SentenceIterator {
 public:
  explicit SampleIterator(const std::vector<std::string>& lines) : lines_(lines) {}
  bool done() const override { return i_ >= lines_.size(); }
  void Next() override { ++i_; }
  const std::string& value() const override { return lines_[i_]; }
  sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }  // default: OK

 private:
  const std::vector<std::string>& lines_;
  std::size_t i_ = 0;
};

// Reservoir sample (seeded) of at most max_lines non-empty lines of all files; returns the lines seen in total.
int64_t sample_lines(const std::vector<std::string>& files, int64_t max_lines, uint64_t seed,
                     std::vector<std::string>& sample) {
  SplitMix64 rng(mix_seed(seed, 0x766f636162ull));
  int64_t seen = 0;
  for (const auto& file : files) {
    CorpusFileReader reader(file);
    std::string_view line;
    while (reader.next(line)) {
      if (line.empty()) continue;
      if (static_cast<int64_t>(sample.size()) < max_lines) {
        sample.emplace_back(line);
      } else {
        const uint64_t j = rng.below(static_cast<uint64_t>(seen + 1));
        if (j < static_cast<uint64_t>(max_lines)) sample[j].assign(line.data(), line.size());
      }
      ++seen;
    }
  }
  return seen;
}

// "--key=value --flag key2=value2" -> {key: value, flag: true, key2: value2}
std::vector<std::pair<std::string, std::string>> parse_extra_options(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
    std::size_t j = i;
    while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j]))) ++j;
    std::string word = text.substr(i, j - i);
    i = j;
    if (word.empty()) continue;
    while (!word.empty() && word[0] == '-') word.erase(0, 1);
    const auto eq = word.find('=');
    if (eq == std::string::npos) out.emplace_back(word, "true");
    else out.emplace_back(word.substr(0, eq), word.substr(eq + 1));
    if (out.back().first.empty()) fail("--sentencepiece-options: cannot read '{}'; write --key=value", word);
  }
  return out;
}

}  // namespace

std::string Vocab::bpe_merges_path(const std::string& vocab_json_path) {
  return (fs::path(vocab_json_path).parent_path() / "merges.txt").string();
}

bool Vocab::is_bpe_path(const std::string& path) { return fs::path(path).extension() == ".json"; }

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read the vocabulary file '{}'", path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

Vocab Vocab::load(const std::string& path) {
  std::error_code ec;
  const std::string name = fs::path(path).filename().string();
  if (name == "merges.txt")
    fail("vocabulary '{}' is a BPE merges file; give the vocab.json beside it (lseq reads merges.txt from there)",
         path);
  if (!fs::is_regular_file(path, ec)) {
    if (is_bpe_path(path))
      fail("vocabulary '{}' does not exist; lseq reads GPT-2 byte-level BPE tokenizers but does not train them: give "
           "an existing vocab.json (with merges.txt beside it), or a .spm path for lstrain to train a SentencePiece "
           "model",
           path);
    fail("vocabulary '{}' does not exist; give a SentencePiece model, or a new path for lstrain to train one", path);
  }
  if (is_bpe_path(path)) {
    const std::string merges = bpe_merges_path(path);
    if (!fs::is_regular_file(merges, ec))
      fail("vocabulary '{}' is a GPT-2 byte-level BPE vocab.json, but its merges file '{}' does not exist; put the "
           "tokenizer's merges.txt beside it (Marian's JSON word lists are not read: give a SentencePiece model)",
           path, merges);
    Vocab v;
    v.path_ = path;
    const std::string vocab_bytes = read_bytes(path), merges_bytes = read_bytes(merges);
    v.bpe_ = std::make_unique<ByteLevelBpe>(ByteLevelBpe::parse(vocab_bytes, merges_bytes, path, merges));
    v.bpe_bytes_ = vocab_bytes + std::string(1, '\0') + merges_bytes;
    return v;
  }
  Vocab v;
  v.path_ = path;
  v.processor_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  sentencepiece::util::Status status;
  try {
    status = v.processor_->Load(path);
  } catch (const std::exception& e) {  // SentencePiece's trie builder throws on some damaged models
    fail("cannot load the SentencePiece model '{}': {}; give an intact model, or a new path for lstrain to train one",
         path, e.what());
  }
  if (!status.ok()) fail("cannot load the SentencePiece model '{}': {}", path, status.ToString());
  const auto& p = *v.processor_;
  if (p.pad_id() != kPadId || p.unk_id() != kUnkId || p.bos_id() != kBosId || p.eos_id() != kEosId)
    fail("vocabulary '{}' has special ids pad={} unk={} bos={} eos={}, but lseq needs pad=0 unk=1 bos=2 eos=3; "
         "give a new path so that lstrain trains a matching vocabulary",
         path, p.pad_id(), p.unk_id(), p.bos_id(), p.eos_id());
  return v;
}

void Vocab::train(const std::vector<std::string>& corpus_files, const std::string& path,
                  const VocabTrainOptions& options) {
  using clock = std::chrono::steady_clock;
  if (corpus_files.empty()) fail("cannot train the vocabulary '{}': no corpus files given", path);
  if (options.max_lines <= 0) fail("--sentencepiece-max-lines must be positive (got {})", options.max_lines);
  if (options.vocab_size < 8) fail("--dim-vocabs must be at least 8 (got {})", options.vocab_size);

  std::string names;
  for (const auto& f : corpus_files) names += (names.empty() ? "" : ", ") + f;
  spdlog::info("vocabulary {}: sampling at most {} lines of {}", path, options.max_lines, names);
  auto start = clock::now();
  std::vector<std::string> sample;
  const int64_t seen = sample_lines(corpus_files, options.max_lines, options.seed, sample);
  if (sample.empty()) fail("cannot train the vocabulary '{}': the files {} contain no text", path, names);
  spdlog::info("vocabulary {}: sampled {} of {} lines in {:.1f} s", path, sample.size(), seen,
               std::chrono::duration<double>(clock::now() - start).count());

  // Huge samples contain stray characters; leaving the rarest 0.05% to <unk> keeps them out of the vocabulary.
  const char* coverage = sample.size() >= 1000000 ? "0.9995" : "1.0";
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  // A key=value map rather than an argument string: later --sentencepiece-options then override our defaults, and
  // the trainer does not echo the command to stderr. minloglevel=1 silences the trainer's progress output.
  std::unordered_map<std::string, std::string> args = {
      {"model_type", "unigram"},
      {"vocab_size", std::to_string(options.vocab_size)},
      {"character_coverage", coverage},
      {"hard_vocab_limit", "false"},
      {"pad_id", std::to_string(kPadId)},
      {"unk_id", std::to_string(kUnkId)},
      {"bos_id", std::to_string(kBosId)},
      {"eos_id", std::to_string(kEosId)},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"num_threads", std::to_string(threads)},
      {"minloglevel", "1"},
  };
  for (const auto& [key, value] : parse_extra_options(options.extra_options)) args[key] = value;

  spdlog::info("vocabulary {}: training a unigram SentencePiece model of at most {} pieces", path,
               options.vocab_size);
  start = clock::now();
  SampleIterator iterator(sample);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &iterator, &model);
  if (!status.ok())
    fail("training the vocabulary '{}' failed: {}; check --sentencepiece-options and --dim-vocabs", path,
         status.ToString());
  {
    std::error_code ec;
    const fs::path parent = fs::path(path).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
  }
  write_file_atomic(path, model);
  const Vocab trained = load(path);
  spdlog::info("vocabulary {}: trained {} pieces in {:.1f} s", path, trained.size(),
               std::chrono::duration<double>(clock::now() - start).count());
}

Vocab::Vocab(Vocab&&) noexcept = default;
Vocab& Vocab::operator=(Vocab&&) noexcept = default;
Vocab::~Vocab() = default;

std::vector<int32_t> Vocab::encode(std::string_view text) const {
  if (bpe_) {
    std::vector<int32_t> ids = bpe_->encode(text);
    const int32_t end = bpe_->end_of_text_id();
    for (int32_t& id : ids) id = id == end ? kEosId : id + kBpeIdOffset;
    return ids;
  }
  std::vector<int> ids;
  const auto status = processor_->Encode(text, &ids);
  if (!status.ok()) fail("cannot encode text with the vocabulary '{}': {}", path_, status.ToString());
  return std::vector<int32_t>(ids.begin(), ids.end());
}

std::string Vocab::decode(const std::vector<int32_t>& ids) const {
  if (bpe_) {  // specials, unk and ids outside the vocabulary are skipped
    std::vector<int32_t> shifted;
    shifted.reserve(ids.size());
    for (int32_t id : ids)
      if (id >= kBpeIdOffset) shifted.push_back(id - kBpeIdOffset);
    return bpe_->decode(shifted);
  }
  std::vector<int> kept;
  kept.reserve(ids.size());
  const int n = size();
  for (int32_t id : ids) {
    if (id == kPadId || id == kBosId || id == kEosId) continue;
    kept.push_back(id >= 0 && id < n ? id : kUnkId);
  }
  std::string text;
  const auto status = processor_->Decode(kept, &text);
  if (!status.ok()) fail("cannot decode ids with the vocabulary '{}': {}", path_, status.ToString());
  return text;
}

int Vocab::size() const { return bpe_ ? bpe_->size() + kBpeIdOffset : processor_->GetPieceSize(); }

std::string Vocab::serialized() const { return bpe_ ? bpe_bytes_ : processor_->serialized_model_proto(); }

std::string Vocab::fingerprint() const {
  uint64_t hash = 14695981039346656037ull;  // 64-bit FNV-1a
  for (const char c : serialized()) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return fmt::format("fnv1a64:{:016x}", hash);
}

}  // namespace lseq::data
