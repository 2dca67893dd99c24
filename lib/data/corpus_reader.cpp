#include "data/corpus_reader.h"

#include <spdlog/spdlog.h>
#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "data/utf8.h"
#include "util/error.h"

namespace lseq::data {

namespace {
constexpr std::size_t kBlock = 1 << 20;

bool has_gzip_magic(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  unsigned char magic[2] = {0, 0};
  const std::size_t n = std::fread(magic, 1, 2, f);
  std::fclose(f);
  return n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}
}  // namespace

// Either a plain FILE* or a zlib stream; read() returns bytes read, 0 at the end.
struct CorpusFileReader::Source {
  FILE* plain = nullptr;
  gzFile gz = nullptr;
  std::string path;

  std::size_t read(char* out, std::size_t n) {
    if (gz) {
      const int got = gzread(gz, out, static_cast<unsigned>(n));
      if (got < 0) {
        int code = 0;
        const char* message = gzerror(gz, &code);
        fail("cannot read gzip file '{}': {}; check that it is a complete, valid .gz file", path,
             message ? message : "error");
      }
      if (got == 0) {  // zlib reports a truncated stream only through gzerror
        int code = Z_OK;
        const char* message = gzerror(gz, &code);
        if (code != Z_OK)
          fail("gzip file '{}' is truncated or damaged ({}); check that it was copied completely", path,
               message ? message : "error");
      }
      return static_cast<std::size_t>(got);
    }
    const std::size_t got = std::fread(out, 1, n, plain);
    if (got < n && std::ferror(plain)) fail("cannot read '{}': {}", path, std::strerror(errno));
    return got;
  }
  ~Source() {
    if (gz) gzclose(gz);
    if (plain) std::fclose(plain);
  }
};

CorpusFileReader::CorpusFileReader(const std::string& path) : path_(path), source_(std::make_unique<Source>()) {
  source_->path = path;
  FILE* probe = std::fopen(path.c_str(), "rb");
  if (!probe) fail("cannot open corpus file '{}': {}; check the path", path, std::strerror(errno));
  std::fclose(probe);
  if (has_gzip_magic(path)) {
    source_->gz = gzopen(path.c_str(), "rb");
    if (!source_->gz) fail("cannot open gzip file '{}'", path);
    gzbuffer(source_->gz, 1 << 18);
  } else {
    source_->plain = std::fopen(path.c_str(), "rb");
    if (!source_->plain) fail("cannot open corpus file '{}': {}; check the path", path, std::strerror(errno));
  }
  buffer_.resize(kBlock);
}

CorpusFileReader::~CorpusFileReader() = default;

bool CorpusFileReader::compressed() const { return source_->gz != nullptr; }

bool CorpusFileReader::fill() {
  if (eof_) return false;
  // Keep the unread tail at the front; grow when a single line fills the whole buffer.
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buffer_.size()) buffer_.resize(buffer_.size() * 2);
  const std::size_t got = source_->read(buffer_.data() + end_, buffer_.size() - end_);
  if (got == 0) eof_ = true;
  end_ += got;
  return got > 0;
}

bool CorpusFileReader::next(std::string_view& line) {
  std::size_t scanned = begin_;
  const char* newline = nullptr;
  for (;;) {
    newline = static_cast<const char*>(std::memchr(buffer_.data() + scanned, '\n', end_ - scanned));
    if (newline) break;
    const std::size_t searched = end_ - begin_;  // all unread bytes hold no newline
    if (!fill()) break;
    scanned = begin_ + searched;
  }
  std::size_t length;
  if (newline) {
    length = static_cast<std::size_t>(newline - (buffer_.data() + begin_));
  } else {
    if (begin_ == end_) return false;  // end of file, no unterminated last line
    length = end_ - begin_;
  }
  line = std::string_view(buffer_.data() + begin_, length);
  begin_ += length + (newline ? 1 : 0);
  ++lines_;
  line = without_carriage_returns(line);
  const std::size_t bad = find_invalid_utf8(line);
  if (bad != std::string_view::npos)
    fail("'{}' line {}: invalid UTF-8 at byte {} of the line; convert the file to UTF-8 (e.g. with iconv)", path_,
         lines_, bad + 1);
  return true;
}

CorpusReader::CorpusReader(const std::vector<std::string>& paths) {
  if (paths.empty()) fail("no corpus files given");
  for (const auto& p : paths) readers_.push_back(std::make_unique<CorpusFileReader>(p));
}

bool CorpusReader::next(std::vector<std::string_view>& sides) {
  sides.resize(readers_.size());
  for (;;) {
    std::size_t ended = 0;
    for (std::size_t i = 0; i < readers_.size(); ++i)
      if (!readers_[i]->next(sides[i])) ++ended;
    if (ended == readers_.size()) return false;
    if (ended > 0) {
      // Name the first file that ended and one that continues.
      std::size_t short_file = 0, long_file = 0;
      for (std::size_t i = 0; i < readers_.size(); ++i) {
        if (readers_[i]->line_number() == line_) short_file = i;
        else long_file = i;
      }
      fail("parallel corpus files differ in length: '{}' ends after line {} but '{}' has a line {}; give files "
           "with the same number of lines (one sentence a line)",
           readers_[short_file]->path(), line_, readers_[long_file]->path(), line_ + 1);
    }
    ++line_;
    bool empty = false;
    for (const auto& s : sides) empty |= s.empty();
    if (!empty) return true;
    ++skipped_empty_;
  }
}

void log_skipped_empty(int64_t skipped, const std::vector<std::string>& paths) {
  if (skipped == 0) return;
  std::string names;
  for (const auto& p : paths) names += (names.empty() ? "" : ", ") + p;
  spdlog::warn("skipped {} pairs with an empty side in {}", skipped, names);
}

}  // namespace lseq::data
