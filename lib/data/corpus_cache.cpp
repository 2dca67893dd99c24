#include "data/corpus_cache.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <exception>
#include <thread>

#include "data/corpus_reader.h"
#include "data/vocab.h"
#include "util/error.h"

namespace lseq::data {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'L', 'S', 'E', 'Q', 'C', 'O', 'R', 'P'};
// 2: the header holds a CRC-32 of everything after it. 3: every '\r' at a line's end is removed, not only the last
// (a cache of version 2 may hold the others as tokens).
constexpr uint32_t kVersion = 3;
constexpr int kMaxStreams = 8;
constexpr std::size_t kHeaderBytes = 256;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t streams;
  uint32_t token_bytes;
  uint32_t complete;  // 1 once everything after the header was written
  uint64_t key[2];
  int64_t pairs;
  int64_t total_tokens;  // all sides
  int64_t lines_read, skipped_empty, skipped_long, cropped;
  int64_t side_tokens[kMaxStreams];
  uint32_t body_crc;  // CRC-32 (zlib's) of every byte after the header
};
static_assert(sizeof(Header) <= kHeaderBytes, "cache header too large");

std::size_t align8(std::size_t n) { return (n + 7) & ~std::size_t(7); }

struct Layout {
  std::size_t tokens, lengths, offsets, lines, end;
};

Layout layout_of(const Header& h) {
  Layout l;
  l.tokens = kHeaderBytes;
  l.lengths = align8(l.tokens + static_cast<std::size_t>(h.total_tokens) * h.token_bytes);
  l.offsets = align8(l.lengths + static_cast<std::size_t>(h.pairs) * h.streams * sizeof(uint32_t));
  l.lines = l.offsets + static_cast<std::size_t>(h.pairs) * sizeof(int64_t);
  l.end = l.lines + static_cast<std::size_t>(h.pairs) * sizeof(int64_t);
  return l;
}

// A 128-bit non-cryptographic hash (two multiply-rotate lanes over 8-byte words): enough to tell corpora apart.
class Hasher {
 public:
  void bytes(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (; n >= 8; p += 8, n -= 8) {
      uint64_t w;
      std::memcpy(&w, p, 8);
      word(w);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, p, n);
    word(tail ^ (uint64_t(n) << 56));
  }
  void u64(uint64_t v) { word(v); }
  void text(const std::string& s) {
    u64(s.size());
    bytes(s.data(), s.size());
  }
  void digest(uint64_t out[2]) const {
    out[0] = fmix(a_ ^ (b_ >> 7));
    out[1] = fmix(b_ + a_ * 31);
  }

 private:
  static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static uint64_t fmix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
  }
  void word(uint64_t w) {
    a_ = rotl(a_ ^ (w * 0x87c37b91114253d5ull), 31) * 0x4cf5ad432745937full;
    b_ = rotl(b_ + (w * 0x9E3779B97F4A7C15ull), 27) * 0x52dce729ull + a_;
  }
  uint64_t a_ = 0x243F6A8885A308D3ull, b_ = 0x13198A2E03707344ull;
};

// Hash of a file's identity: path, size, modification time and its content (all of it up to 4 MiB, else the
// first and the last MiB).
void hash_file(Hasher& h, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    fail("cannot open corpus file '{}': {}; check the path", path, std::strerror(errno));
  std::error_code ec;
  const fs::path absolute = fs::absolute(path, ec);
  h.text(ec ? path : absolute.lexically_normal().string());
  h.u64(static_cast<uint64_t>(st.st_size));
  h.u64(static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull + static_cast<uint64_t>(st.st_mtim.tv_nsec));
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail("cannot read corpus file '{}': {}", path, std::strerror(errno));
  constexpr std::size_t kMiB = 1 << 20;
  std::vector<char> buffer(kMiB);
  auto hash_range = [&](long offset, std::size_t bytes) {
    std::fseek(f, offset, SEEK_SET);
    while (bytes > 0) {
      const std::size_t got = std::fread(buffer.data(), 1, std::min(bytes, buffer.size()), f);
      if (got == 0) break;
      h.bytes(buffer.data(), got);
      bytes -= got;
    }
  };
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size <= 4 * kMiB) {
    hash_range(0, size);
  } else {
    hash_range(0, kMiB);
    hash_range(static_cast<long>(size - kMiB), kMiB);
  }
  std::fclose(f);
}

void cache_key(const CorpusOptions& options, const std::vector<const Vocab*>& vocabs, uint64_t key[2]) {
  Hasher h;
  h.u64(kVersion);
  h.u64(options.files.size());
  for (const auto& f : options.files) hash_file(h, f);
  for (const Vocab* v : vocabs) h.text(v->serialized());
  h.u64(static_cast<uint64_t>(options.max_length));
  h.u64(options.crop ? 1 : 0);
  h.u64(static_cast<uint64_t>(options.token_bytes));
  h.digest(key);
}

std::string hex8(uint64_t v) { return fmt::format("{:08x}", static_cast<uint32_t>(v ^ (v >> 32))); }

// A directory without any write permission bit counts as read-only even for root (who could write anyway):
// shared corpus directories are often marked that way on purpose.
bool directory_writable(const fs::path& dir) {
  struct stat st {};
  return ::stat(dir.c_str(), &st) == 0 && (st.st_mode & 0222) != 0 && ::access(dir.c_str(), W_OK | X_OK) == 0;
}

// Where the bytes of a cache (or an in-memory corpus) go while it is built.
// Appends and the header, written last at offset 0, go through different calls: the body's checksum is taken
// from the appends.
class Sink {
 public:
  virtual ~Sink() = default;
  void write(const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    const std::size_t header_part = position_ < kHeaderBytes ? std::min(n, kHeaderBytes - position_) : 0;
    body_crc_ = crc32_z(body_crc_, p + header_part, n - header_part);
    append(p, n);
    position_ += n;
  }
  virtual void write_at(std::size_t offset, const void* data, std::size_t n) = 0;
  std::size_t position() const { return position_; }
  uint32_t body_crc() const { return static_cast<uint32_t>(body_crc_); }
  void pad_to(std::size_t offset) {
    static const char zeros[8] = {};
    while (position_ < offset) write(zeros, std::min<std::size_t>(8, offset - position_));
  }

 protected:
  virtual void append(const unsigned char* data, std::size_t n) = 0;

 private:
  std::size_t position_ = 0;
  uLong body_crc_ = crc32_z(0, nullptr, 0);
};

class FileSink : public Sink {
 public:
  explicit FileSink(const std::string& path) : path_(path) {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) fail("cannot write the corpus cache '{}': {}", path, std::strerror(errno));
    std::setvbuf(file_, nullptr, _IOFBF, 1 << 20);
  }
  ~FileSink() override {
    if (file_) std::fclose(file_);
  }
  void append(const unsigned char* data, std::size_t n) override {
    if (n && std::fwrite(data, 1, n, file_) != n)
      fail("cannot write the corpus cache '{}': {} (disk full? set a cache directory with more space)", path_,
           std::strerror(errno));
  }
  void write_at(std::size_t offset, const void* data, std::size_t n) override {
    std::fflush(file_);
    std::fseek(file_, static_cast<long>(offset), SEEK_SET);
    if (std::fwrite(data, 1, n, file_) != n) fail("cannot write the corpus cache '{}'", path_);
    std::fseek(file_, 0, SEEK_END);
  }
  void close() {
    const bool ok = std::fflush(file_) == 0 && ::fsync(fileno(file_)) == 0;
    std::fclose(file_);
    file_ = nullptr;
    if (!ok) fail("cannot write the corpus cache '{}': {}", path_, std::strerror(errno));
  }

 private:
  std::string path_;
  FILE* file_ = nullptr;
};

class MemorySink : public Sink {
 public:
  explicit MemorySink(std::vector<unsigned char>& out) : out_(out) {}
  void append(const unsigned char* data, std::size_t n) override { out_.insert(out_.end(), data, data + n); }
  void write_at(std::size_t offset, const void* data, std::size_t n) override {
    std::memcpy(out_.data() + offset, data, n);
  }

 private:
  std::vector<unsigned char>& out_;
};

// Encodes the corpus into the sink in the cache layout; returns the completed header.
Header encode_corpus(const CorpusOptions& options, const std::vector<const Vocab*>& vocabs, const uint64_t key[2],
                     Sink& sink) {
  using clock = std::chrono::steady_clock;
  const std::size_t streams = options.files.size();
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kVersion;
  h.streams = static_cast<uint32_t>(streams);
  h.key[0] = key[0], h.key[1] = key[1];
  h.token_bytes = 2;
  for (const Vocab* v : vocabs)
    if (v->size() > 65536) h.token_bytes = 4;
  if (options.token_bytes == 4) h.token_bytes = 4;
  sink.pad_to(kHeaderBytes);  // the header is written last

  std::vector<std::vector<uint32_t>> lengths(streams);
  std::vector<int64_t> offsets, lines;
  CorpusReader reader(options.files);
  const int threads = options.threads > 0
                          ? options.threads
                          : static_cast<int>(std::max(1u, std::min(16u, std::thread::hardware_concurrency())));
  // Chunks of pairs: while the threads encode one chunk, this thread reads the next.
  constexpr std::size_t kChunk = 16384;
  struct Chunk {
    std::vector<std::vector<std::string>> text;
    std::vector<int64_t> lines;
    std::size_t n = 0;
  };
  Chunk chunks[2];
  for (auto& c : chunks) {
    c.text.assign(streams, std::vector<std::string>(kChunk));
    c.lines.resize(kChunk);
  }
  std::vector<std::string_view> sides;
  auto read_chunk = [&](Chunk& c) {
    c.n = 0;
    while (c.n < kChunk && reader.next(sides)) {
      for (std::size_t s = 0; s < streams; ++s) c.text[s][c.n].assign(sides[s].data(), sides[s].size());
      c.lines[c.n++] = reader.line_index();
    }
  };
  std::vector<std::vector<std::vector<int32_t>>> ids(streams, std::vector<std::vector<int32_t>>(kChunk));
  std::vector<uint16_t> narrow;
  int64_t written = 0;
  const auto start = clock::now();
  auto last_report = start;

  read_chunk(chunks[0]);
  for (int current = 0; chunks[current].n > 0; current = 1 - current) {
    const Chunk& chunk = chunks[current];
    const std::size_t n = chunk.n;
    // SentencePieceProcessor::Encode is const and thread-safe.
    std::vector<std::string> errors(static_cast<std::size_t>(threads));
    auto encode_range = [&](int t, std::size_t from, std::size_t to) {
      try {
        for (std::size_t s = 0; s < streams; ++s)
          for (std::size_t i = from; i < to; ++i) ids[s][i] = vocabs[s]->encode(chunk.text[s][i]);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(t)] = e.what();
      }
    };
    std::vector<std::thread> pool;
    const std::size_t per = (n + threads - 1) / threads;
    for (int t = 0; t < threads && t * per < n; ++t)
      pool.emplace_back(encode_range, t, t * per, std::min(n, (t + 1) * per));
    std::exception_ptr read_error;
    try {
      read_chunk(chunks[1 - current]);
    } catch (...) {
      read_error = std::current_exception();
    }
    for (auto& t : pool) t.join();
    if (read_error) std::rethrow_exception(read_error);
    for (const auto& e : errors)
      if (!e.empty()) throw Error(e);

    for (std::size_t i = 0; i < n; ++i) {
      bool empty = false, too_long = false;
      for (std::size_t s = 0; s < streams; ++s) {
        empty |= ids[s][i].empty();
        too_long |= options.max_length > 0 && ids[s][i].size() > static_cast<std::size_t>(options.max_length);
      }
      if (empty) {  // e.g. a line of spaces only: nothing to learn from
        ++h.skipped_empty;
        continue;
      }
      if (too_long) {
        if (!options.crop) {
          ++h.skipped_long;
          continue;
        }
        ++h.cropped;
        for (std::size_t s = 0; s < streams; ++s)
          if (ids[s][i].size() > static_cast<std::size_t>(options.max_length)) ids[s][i].resize(options.max_length);
      }
      offsets.push_back(written);
      lines.push_back(chunk.lines[i]);
      for (std::size_t s = 0; s < streams; ++s) {
        const auto& v = ids[s][i];
        lengths[s].push_back(static_cast<uint32_t>(v.size()));
        h.side_tokens[s] += static_cast<int64_t>(v.size());
        written += static_cast<int64_t>(v.size());
        if (h.token_bytes == 2) {
          narrow.assign(v.begin(), v.end());
          sink.write(narrow.data(), narrow.size() * 2);
        } else {
          sink.write(v.data(), v.size() * 4);
        }
      }
    }
    const auto now = clock::now();
    if (now - last_report > std::chrono::seconds(5)) {
      last_report = now;
      const double seconds = std::chrono::duration<double>(now - start).count();
      spdlog::info("encoding {}: {} lines, {:.0f} lines/s", options.files[0], reader.lines_read(),
                   reader.lines_read() / seconds);
    }
  }

  h.pairs = static_cast<int64_t>(offsets.size());
  h.total_tokens = written;
  h.lines_read = reader.lines_read();
  h.skipped_empty += reader.skipped_empty();
  const Layout l = layout_of(h);
  sink.pad_to(l.lengths);
  for (std::size_t s = 0; s < streams; ++s) sink.write(lengths[s].data(), lengths[s].size() * sizeof(uint32_t));
  sink.pad_to(l.offsets);
  sink.write(offsets.data(), offsets.size() * sizeof(int64_t));
  sink.write(lines.data(), lines.size() * sizeof(int64_t));
  h.complete = 1;
  h.body_crc = sink.body_crc();
  unsigned char header_bytes[kHeaderBytes] = {};
  std::memcpy(header_bytes, &h, sizeof(h));
  sink.write_at(0, header_bytes, kHeaderBytes);
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  spdlog::info("encoded {}: {} pairs kept of {} lines, {} tokens, {:.1f} s ({:.0f} lines/s)", options.files[0],
               h.pairs, h.lines_read, written, seconds, h.lines_read / std::max(seconds, 1e-9));
  return h;
}

// Checks what the header says of the body against the body itself: pairs stored back to back, in line order,
// within --max-length, and ids inside their side's vocabulary. Returns what is wrong, or an empty string. One pass
// over the lengths and the tokens: cheap next to training on them, and it keeps a damaged file from reaching the
// batcher (which trusts offsets and lengths) or the model.
std::string check_contents(const unsigned char* data, const Header& h, const std::vector<const Vocab*>& vocabs,
                           int max_length) {
  const Layout l = layout_of(h);
  const auto* lengths = reinterpret_cast<const uint32_t*>(data + l.lengths);
  const auto* offsets = reinterpret_cast<const int64_t*>(data + l.offsets);
  const auto* lines = reinterpret_cast<const int64_t*>(data + l.lines);
  const auto pairs = static_cast<std::size_t>(h.pairs);
  int64_t next_offset = 0, previous_line = -1;
  int64_t side_tokens[kMaxStreams] = {};
  for (std::size_t i = 0; i < pairs; ++i) {
    if (offsets[i] != next_offset)
      return fmt::format("pair {} starts at token {}, not at {} where the pairs before it end", i, offsets[i],
                         next_offset);
    if (lines[i] <= previous_line || lines[i] >= h.lines_read)
      return fmt::format("pair {} names line {}, out of order or past the {} lines read", i, lines[i], h.lines_read);
    previous_line = lines[i];
    for (std::size_t s = 0; s < h.streams; ++s) {
      const uint32_t length = lengths[s * pairs + i];
      if (length == 0) return fmt::format("pair {} has no tokens on side {}", i, s);
      if (max_length > 0 && length > static_cast<uint32_t>(max_length))
        return fmt::format("pair {} has {} tokens on side {}, more than --max-length {}", i, length, s, max_length);
      if (next_offset + length > h.total_tokens)
        return fmt::format("pair {} runs past the {} tokens stored", i, h.total_tokens);
      const int32_t vocab_size = vocabs[s]->size();
      int32_t smallest = 0, largest = 0;
      if (h.token_bytes == 2) {
        const uint16_t* t = reinterpret_cast<const uint16_t*>(data + l.tokens) + next_offset;
        for (uint32_t k = 0; k < length; ++k) largest = std::max<int32_t>(largest, t[k]);
      } else {
        const int32_t* t = reinterpret_cast<const int32_t*>(data + l.tokens) + next_offset;
        for (uint32_t k = 0; k < length; ++k) smallest = std::min(smallest, t[k]), largest = std::max(largest, t[k]);
      }
      const int32_t bad = smallest < 0 ? smallest : largest;
      if (smallest < 0 || largest >= vocab_size)
        return fmt::format("pair {} holds token id {}, outside the vocabulary of {} entries of side {}", i, bad,
                           vocab_size, s);
      next_offset += length;
      side_tokens[s] += length;
    }
  }
  if (next_offset != h.total_tokens)
    return fmt::format("its pairs hold {} tokens, its header says {}", next_offset, h.total_tokens);
  for (std::size_t s = 0; s < h.streams; ++s)
    if (side_tokens[s] != h.side_tokens[s])
      return fmt::format("side {} holds {} tokens, its header says {}", s, side_tokens[s], h.side_tokens[s]);
  return "";
}

// Why a cache file cannot be used (an empty reason when it can). A damaged file (truncated, overwritten, changed
// on disk) is told apart from one that is merely out of date, so that the rebuild can say which it was.
struct CacheProblem {
  std::string reason;
  bool damaged = false;
};

CacheProblem check_cache(const unsigned char* data, std::size_t size, const uint64_t key[2],
                         const std::vector<const Vocab*>& vocabs, int max_length) {
  if (size < kHeaderBytes) return {"it is shorter than its header", true};
  Header h;
  std::memcpy(&h, data, sizeof(h));
  if (std::memcmp(h.magic, kMagic, 8) != 0) return {"it does not start like an lseq corpus cache", true};
  if (h.version != kVersion)
    return {fmt::format("it has the cache format version {}, and this lseq reads version {}", h.version, kVersion)};
  if (!h.complete) return {"its header was never completed", true};
  if (h.key[0] != key[0] || h.key[1] != key[1] || h.streams != vocabs.size())
    return {"the corpus files, vocabularies or length options changed"};
  // Each pair takes at least 16 bytes and each token 2: larger counts cannot be right (nor overflow the layout).
  const auto bound = static_cast<int64_t>(size);
  if (h.pairs < 0 || h.pairs > bound || h.total_tokens < 0 || h.total_tokens > bound ||
      (h.token_bytes != 2 && h.token_bytes != 4) || layout_of(h).end != size)
    return {fmt::format("its size ({} bytes) does not match its header", size), true};
  if (crc32_z(crc32_z(0, nullptr, 0), data + kHeaderBytes, size - kHeaderBytes) != h.body_crc)
    return {"its contents do not match the checksum in its header", true};
  const std::string wrong = check_contents(data, h, vocabs, max_length);
  if (!wrong.empty()) return {wrong, true};
  return {};
}

}  // namespace

struct EncodedCorpus::Storage {
  std::vector<unsigned char> memory;
  void* map = nullptr;
  std::size_t map_size = 0;
  const unsigned char* data() const { return map ? static_cast<const unsigned char*>(map) : memory.data(); }
  std::size_t size() const { return map ? map_size : memory.size(); }
  ~Storage() {
    if (map) ::munmap(map, map_size);
  }
};

namespace {
// Maps a whole file read-only; nullptr when it cannot be opened.
std::unique_ptr<EncodedCorpus::Storage> map_file(const std::string& path);
}  // namespace

EncodedCorpus::~EncodedCorpus() = default;

void EncodedCorpus::attach(std::unique_ptr<Storage> storage) {
  storage_ = std::move(storage);
  const unsigned char* base = storage_->data();
  Header h;
  std::memcpy(&h, base, sizeof(h));
  const Layout l = layout_of(h);
  streams_ = static_cast<int>(h.streams);
  pairs_ = h.pairs;
  token_bytes_ = static_cast<int>(h.token_bytes);
  tokens_ = base + l.tokens;
  for (int s = 0; s < streams_; ++s) {
    lengths_[s] = reinterpret_cast<const uint32_t*>(base + l.lengths) + static_cast<std::size_t>(s) * pairs_;
    side_tokens_[s] = h.side_tokens[s];
  }
  offsets_ = reinterpret_cast<const int64_t*>(base + l.offsets);
  lines_ = reinterpret_cast<const int64_t*>(base + l.lines);
  lines_read_ = h.lines_read;
  skipped_empty_ = h.skipped_empty;
  skipped_long_ = h.skipped_long;
  cropped_ = h.cropped;
}

std::vector<int32_t> EncodedCorpus::tokens(int side, int64_t pair) const {
  std::vector<int32_t> out(length(side, pair));
  copy_tokens(side, pair, out.data());
  return out;
}

std::shared_ptr<const EncodedCorpus> EncodedCorpus::open_or_build(const CorpusOptions& options,
                                                                  const std::vector<const Vocab*>& vocabs) {
  if (options.files.empty()) fail("no corpus files given");
  if (options.files.size() > static_cast<std::size_t>(kMaxStreams))
    fail("at most {} parallel corpus files are supported (got {})", kMaxStreams, options.files.size());
  if (vocabs.size() != options.files.size())
    fail("{} corpus files but {} vocabularies; give one vocabulary per file (--vocabs)", options.files.size(),
         vocabs.size());
  for (const Vocab* v : vocabs)
    if (!v) fail("a vocabulary for the corpus is missing; give one per corpus file (--vocabs)");
  if (options.token_bytes != 0 && options.token_bytes != 2 && options.token_bytes != 4)
    fail("the corpus token width must be 0 (automatic), 2 or 4 bytes (got {})", options.token_bytes);
  if (options.max_length < 0) fail("--max-length must not be negative (got {})", options.max_length);
  for (const auto& f : options.files) CorpusFileReader probe(f);  // names a missing file before anything else

  uint64_t key[2];
  cache_key(options, vocabs, key);
  auto corpus = std::shared_ptr<EncodedCorpus>(new EncodedCorpus());

  if (!options.use_cache) {
    auto storage = std::make_unique<Storage>();
    MemorySink sink(storage->memory);
    encode_corpus(options, vocabs, key, sink);
    corpus->attach(std::move(storage));
  } else {
    // The cache's name: beside the corpus, the files' names; elsewhere also a hash of their full paths.
    std::string name;
    Hasher path_hash;
    for (const auto& f : options.files) {
      name += (name.empty() ? "" : "+") + fs::path(f).filename().string();
      std::error_code ec;
      path_hash.text(fs::absolute(f, ec).lexically_normal().string());
    }
    uint64_t ph[2];
    path_hash.digest(ph);
    const std::string elsewhere_name = name + "." + hex8(ph[0]) + ".lseq-cache";
    name += ".lseq-cache";
    fs::path first_dir = fs::path(options.files[0]).parent_path();
    if (first_dir.empty()) first_dir = ".";
    std::vector<fs::path> candidates;
    if (!options.cache_dir.empty()) {
      candidates.push_back(fs::path(options.cache_dir) / elsewhere_name);
    } else {
      candidates.push_back(first_dir / name);
      std::error_code ec;
      candidates.push_back(fs::temp_directory_path(ec) / "lseq-cache" / elsewhere_name);
    }

    std::string reason = "there is none yet", unusable;  // unusable: the cache file found and why it cannot serve
    for (const auto& candidate : candidates) {
      const auto start = std::chrono::steady_clock::now();
      auto storage = map_file(candidate.string());
      if (!storage) continue;
      const CacheProblem problem = check_cache(storage->data(), storage->size(), key, vocabs, options.max_length);
      if (problem.reason.empty()) {
        corpus->attach(std::move(storage));
        corpus->from_cache_ = true;
        corpus->cache_path_ = candidate.string();
        spdlog::info("read the corpus cache {}: {} pairs (verified in {:.1f} s)", corpus->cache_path_, corpus->size(),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
        return corpus;
      }
      reason = problem.reason;
      unusable = fmt::format("the corpus cache {} cannot be used ({})", candidate.string(), problem.reason);
      // It is derived data: rebuilding it from the corpus is the repair.
      if (problem.damaged)
        spdlog::warn("{}; it is damaged, rebuilding it", unusable);
      else
        spdlog::info("{}: rebuilding it", unusable);
    }

    fs::path target = candidates[0];
    if (!options.cache_dir.empty()) {
      std::error_code ec;
      if (fs::create_directories(options.cache_dir, ec))
        spdlog::info("created the cache directory '{}' (--cache-dir)", options.cache_dir);
      if (!directory_writable(options.cache_dir))
        fail("{}the cache directory '{}' is not writable; give a writable one",
             unusable.empty() ? "" : unusable + " and cannot be rebuilt: ", options.cache_dir);
    } else if (!directory_writable(first_dir)) {
      target = candidates[1];
      std::error_code ec;
      fs::create_directories(target.parent_path(), ec);
      spdlog::warn("the corpus directory '{}' is not writable: writing the corpus cache to {}", first_dir.string(),
                   target.string());
    }
    spdlog::info("encoding {} into the corpus cache {} ({})", name.substr(0, name.size() - 11), target.string(),
                 reason);
    const std::string temp = target.string() + ".tmp." + std::to_string(::getpid()) + "." +
                             hex8(static_cast<uint64_t>(
                                 std::chrono::steady_clock::now().time_since_epoch().count()));
    try {
      FileSink sink(temp);
      encode_corpus(options, vocabs, key, sink);
      sink.close();
      std::error_code ec;
      fs::rename(temp, target, ec);
      if (ec) fail("cannot move the corpus cache into place at '{}': {}", target.string(), ec.message());
    } catch (...) {
      std::error_code ec;
      fs::remove(temp, ec);
      throw;
    }
    auto storage = map_file(target.string());
    if (!storage) fail("cannot read back the corpus cache '{}'", target.string());
    const CacheProblem problem = check_cache(storage->data(), storage->size(), key, vocabs, options.max_length);
    if (!problem.reason.empty())
      fail("the corpus cache '{}' just written is unusable ({}); is the disk failing?", target.string(),
           problem.reason);
    corpus->attach(std::move(storage));
    corpus->cache_path_ = target.string();
  }
  if (corpus->skipped_empty() > 0) log_skipped_empty(corpus->skipped_empty(), options.files);
  if (corpus->skipped_long() > 0)
    spdlog::warn("skipped {} pairs longer than {} tokens on a side (--max-length)", corpus->skipped_long(),
                 options.max_length);
  if (corpus->cropped() > 0)
    spdlog::info("cropped {} pairs to {} tokens (--max-length-crop)", corpus->cropped(), options.max_length);
  return corpus;
}

namespace {
std::unique_ptr<EncodedCorpus::Storage> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    return nullptr;
  }
  auto storage = std::make_unique<EncodedCorpus::Storage>();
  void* p = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return nullptr;
  storage->map = p;
  storage->map_size = static_cast<std::size_t>(st.st_size);
  return storage;
}
}  // namespace

}  // namespace lseq::data
