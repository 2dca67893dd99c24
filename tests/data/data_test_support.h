#pragma once
// Shared helpers of the data tests: a temporary directory, small files, and tiny vocabularies trained once per
// test binary on the sample corpus (training is the slow part, so every suite reuses them).
#include <fcntl.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "data/vocab.h"

namespace lseq::data::test {

inline std::string sample(const std::string& name) { return std::string(LSEQ_SAMPLE_DIR) + "/" + name; }

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "lseq-data-test-XXXXXX").string();
    if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

inline void write_gzip(const std::string& path, const std::string& content) {
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, content.data(), static_cast<unsigned>(content.size()));
  gzclose(f);
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Captures what the default spdlog logger prints while alive.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto logger = std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(out_));
    spdlog::set_default_logger(logger);
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

inline std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Tiny vocabularies shared by the tests. ctest runs every test in its own process, so a vocabulary is trained once
// per build of the test binary and kept in the temp dir, named by a hash of the training text, the size and the
// test binary's modification time (a rebuilt binary trains afresh). Processes that need one at the same time wait
// for the first to train it (a lock file beside it): under the sanitizers training takes about 40 s of a core.
inline Vocab cached_vocab(const std::string& name, const std::vector<std::string>& files, int size) {
  std::string key_text = std::to_string(size);
  for (const auto& f : files) key_text += read_file(f);
  std::error_code ec;
  const auto built = std::filesystem::last_write_time("/proc/self/exe", ec);
  if (!ec) key_text += std::to_string(built.time_since_epoch().count());
  const auto dir = std::filesystem::temp_directory_path() / "lseq-test-vocabs";
  std::filesystem::create_directories(dir, ec);
  const std::string path =
      (dir / (name + "-" + std::to_string(std::hash<std::string>()(key_text)) + ".spm")).string();
  const int lock = ::open((path + ".lock").c_str(), O_CREAT | O_RDWR, 0644);
  if (lock >= 0) ::flock(lock, LOCK_EX);  // without the lock each process trains its own (Vocab::train is atomic)
  if (!std::filesystem::exists(path)) {
    VocabTrainOptions o;
    o.vocab_size = size;
    Vocab::train(files, path, o);
  }
  if (lock >= 0) ::close(lock);  // releases the lock
  return Vocab::load(path);
}

// Joint vocabulary (500 pieces) of the sample's train.de + train.en, and a different one (300 pieces, German only)
// for tests that need another vocabulary.
struct SharedVocabs {
  Vocab joint = cached_vocab("joint", {sample("train.de"), sample("train.en")}, 500);
  Vocab other = cached_vocab("other", {sample("train.de")}, 300);
  std::string joint_path = joint.path();
};

inline const SharedVocabs& vocabs() {
  static SharedVocabs v;
  return v;
}

}  // namespace lseq::data::test
