#include "data/byte_level_bpe.h"

#if LSEQ_WITH_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/utf8.h"
#include "util/error.h"

namespace lseq::data {

namespace {

// GPT-2's pre-tokenizer: contractions, letters, numbers, other symbols (each with one optional leading space), and
// whitespace (a run before a non-space keeps its last space for the next piece).
constexpr const char* kPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// GPT-2's bytes-to-unicode map: printable Latin-1 bytes stand for themselves, the others (controls, space, DEL,
// NBSP, soft hyphen) for U+0100 onwards in byte order.
struct ByteAlphabet {
  uint32_t code_point[256];
  ByteAlphabet() {
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      code_point[b] = printable ? static_cast<uint32_t>(b) : next++;
    }
  }
};
const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Decodes one code point of valid UTF-8 at text[i], advancing i.
uint32_t next_code_point(std::string_view text, std::size_t& i) {
  const auto c = static_cast<unsigned char>(text[i]);
  int extra = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
  uint32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1F) : extra == 2 ? (c & 0x0F) : (c & 0x07);
  ++i;
  for (; extra > 0 && i < text.size(); --extra, ++i) cp = (cp << 6) | (static_cast<unsigned char>(text[i]) & 0x3F);
  return cp;
}

// Valid UTF-8 of `bytes`, each invalid sequence replaced by U+FFFD (as Rust's from_utf8_lossy, which tokenizers uses).
std::string lossy_utf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  while (!bytes.empty()) {
    const std::size_t bad = find_invalid_utf8(bytes);
    if (bad == std::string_view::npos) {
      out.append(bytes);
      break;
    }
    out.append(bytes.substr(0, bad));
    out += "\xEF\xBF\xBD";
    // Skip the maximal prefix of a valid sequence (at least one byte), as from_utf8_lossy does.
    std::size_t skip = 1;
    const auto c = static_cast<unsigned char>(bytes[bad]);
    const std::size_t want = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 1;
    while (skip < want && bad + skip < bytes.size()) {
      // A longer prefix is kept while it can still become valid: its continuation bytes are in range.
      const auto next = static_cast<unsigned char>(bytes[bad + skip]);
      bool ok = (next & 0xC0) == 0x80;
      if (ok && skip == 1) {
        if (c == 0xE0) ok = next >= 0xA0;
        else if (c == 0xED) ok = next <= 0x9F;
        else if (c == 0xF0) ok = next >= 0x90;
        else if (c == 0xF4) ok = next <= 0x8F;
      }
      if (!ok) break;
      ++skip;
    }
    bytes.remove_prefix(bad + skip);
  }
  return out;
}

std::string read_whole(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read the BPE {} '{}'; give vocab.json with its merges.txt beside it", what, path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace

#if LSEQ_WITH_PCRE2
bool ByteLevelBpe::available() { return true; }

struct ByteLevelBpe::Regex {
  pcre2_code* code = nullptr;
  Regex() {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                         &error, &offset, nullptr);
    if (!code) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      fail("cannot compile GPT-2's pre-tokenizer pattern with PCRE2: {} (at {})", reinterpret_cast<char*>(message),
           offset);
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // faster where the JIT exists; the interpreter otherwise
  }
  ~Regex() { pcre2_code_free(code); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
};
#else
bool ByteLevelBpe::available() { return false; }
struct ByteLevelBpe::Regex {};  // never made: parse() refuses first
#endif

ByteLevelBpe::ByteLevelBpe() = default;
ByteLevelBpe::ByteLevelBpe(ByteLevelBpe&&) noexcept = default;
ByteLevelBpe& ByteLevelBpe::operator=(ByteLevelBpe&&) noexcept = default;
ByteLevelBpe::~ByteLevelBpe() = default;

ByteLevelBpe ByteLevelBpe::load(const std::string& vocab_path, const std::string& merges_path) {
  const std::string vocab = read_whole(vocab_path, "vocabulary");
  const std::string merges = read_whole(merges_path, "merges file");
  return parse(vocab, merges, vocab_path, merges_path);
}

ByteLevelBpe ByteLevelBpe::parse(std::string_view vocab_json, std::string_view merges_txt,
                                 const std::string& vocab_name, const std::string& merges_name) {
  if (!available())
    fail("'{}' is a GPT-2 byte-level BPE vocabulary, but this lseq was built without PCRE2, which its pre-tokenizer "
         "needs: install libpcre2-dev (bash scripts/install-deps.sh) and rebuild",
         vocab_name);
  ByteLevelBpe bpe;
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(vocab_json.begin(), vocab_json.end());
  } catch (const nlohmann::json::exception& e) {
    fail("the BPE vocabulary '{}' is not valid JSON ({}); give GPT-2's vocab.json (an object of token: id)",
         vocab_name, e.what());
  }
  if (!json.is_object() || json.empty())
    fail("the BPE vocabulary '{}' is not a JSON object of token: id; give GPT-2's vocab.json", vocab_name);
  constexpr std::size_t kMaxTokens = 1 << 22;
  if (json.size() > kMaxTokens)
    fail("the BPE vocabulary '{}' has {} tokens, more than lseq takes ({})", vocab_name, json.size(), kMaxTokens);
  bpe.tokens_.assign(json.size(), std::string());
  std::vector<bool> seen(json.size(), false);
  for (const auto& [token, value] : json.items()) {
    if (!value.is_number_integer())
      fail("the BPE vocabulary '{}': the id of '{}' is not an integer", vocab_name, excerpt_for_message(token));
    const int64_t id = value.get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(json.size()))
      fail("the BPE vocabulary '{}': the id {} of '{}' is outside 0..{}; the ids must number the tokens from 0",
           vocab_name, id, excerpt_for_message(token), json.size() - 1);
    if (seen[static_cast<std::size_t>(id)])
      fail("the BPE vocabulary '{}': the id {} is given twice (again for '{}')", vocab_name, id,
           excerpt_for_message(token));
    if (token.empty()) fail("the BPE vocabulary '{}' has an empty token (id {})", vocab_name, id);
    seen[static_cast<std::size_t>(id)] = true;
    bpe.tokens_[static_cast<std::size_t>(id)] = token;
    bpe.ids_.emplace(token, static_cast<int32_t>(id));
  }
  const auto& abc = alphabet();
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    append_utf8(abc.code_point[b], symbol);
    const auto it = bpe.ids_.find(symbol);
    if (it == bpe.ids_.end())
      fail("the BPE vocabulary '{}' lacks the token '{}' of byte {}: a byte-level BPE needs all 256 bytes' tokens",
           vocab_name, symbol, b);
    bpe.byte_ids_[b] = it->second;
  }
  if (const auto it = bpe.ids_.find(kEndOfText); it != bpe.ids_.end()) bpe.end_of_text_ = it->second;

  // merges.txt: an optional "#version" line, then one "left right" pair a line, the rank being its order.
  std::size_t line_no = 0, pos = 0;
  int32_t rank = 0;
  while (pos < merges_txt.size()) {
    std::size_t end = merges_txt.find('\n', pos);
    if (end == std::string_view::npos) end = merges_txt.size();
    std::string_view line = merges_txt.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos)
      fail("the BPE merges file '{}' line {}: '{}' is not two tokens separated by one space", merges_name, line_no,
           excerpt_for_message(line));
    const std::string left(line.substr(0, space)), right(line.substr(space + 1));
    const auto l = bpe.ids_.find(left), r = bpe.ids_.find(right), m = bpe.ids_.find(left + right);
    if (l == bpe.ids_.end() || r == bpe.ids_.end() || m == bpe.ids_.end())
      fail("the BPE merges file '{}' line {}: the token '{}' is not in '{}'; give the merges.txt of that vocab.json",
           merges_name, line_no,
           excerpt_for_message(l == bpe.ids_.end() ? left : r == bpe.ids_.end() ? right : left + right), vocab_name);
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(l->second)) << 32) |
                         static_cast<uint32_t>(r->second);
    bpe.merges_.emplace(key, Merge{rank++, m->second});  // a repeated pair keeps its first (lowest) rank
  }
  bpe.regex_ = std::make_unique<Regex>();
  return bpe;
}

void ByteLevelBpe::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  std::vector<int32_t> symbols;
  symbols.reserve(piece.size());
  for (const char c : piece) symbols.push_back(byte_ids_[static_cast<unsigned char>(c)]);
  const auto find = [&](int32_t left, int32_t right) -> const Merge* {
    const auto it = merges_.find((static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
                                 static_cast<uint32_t>(right));
    return it == merges_.end() ? nullptr : &it->second;
  };
  // Merge the lowest-ranked adjacent pair everywhere (left to right), until no pair has a rank.
  while (symbols.size() > 1) {
    const Merge* best = nullptr;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const Merge* m = find(symbols[i], symbols[i + 1]);
      if (m && (!best || m->rank < best->rank)) {
        best = m;
        at = i;
      }
    }
    if (!best) break;
    const int32_t left = symbols[at], right = symbols[at + 1];
    std::size_t w = at;
    for (std::size_t i = at; i < symbols.size();) {
      if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
        symbols[w++] = best->merged;
        i += 2;
      } else {
        symbols[w++] = symbols[i++];
      }
    }
    symbols.resize(w);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
}

std::vector<int32_t> ByteLevelBpe::encode(std::string_view text) const {
  if (const std::size_t bad = find_invalid_utf8(text); bad != std::string_view::npos)
    fail("cannot encode '{}' with the byte-level BPE: it is not UTF-8 (byte {}); convert the text to UTF-8",
         excerpt_for_message(text), bad);
#if !LSEQ_WITH_PCRE2
  fail("internal: ByteLevelBpe::encode in a build without PCRE2");
#else
  std::vector<int32_t> ids;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(regex_->code, nullptr);
  if (!match) fail("out of memory for PCRE2 match data");
  const std::string_view special = kEndOfText;
  std::size_t start = 0;
  try {
    while (start <= text.size()) {
      std::size_t stop = end_of_text_ >= 0 ? text.find(special, start) : std::string_view::npos;
      const std::size_t segment_end = stop == std::string_view::npos ? text.size() : stop;
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
      std::size_t offset = start;
      while (offset < segment_end) {
        const int rc = pcre2_match(regex_->code, subject, segment_end, offset, PCRE2_NO_UTF_CHECK, match, nullptr);
        if (rc < 0) {
          if (rc == PCRE2_ERROR_NOMATCH) break;
          fail("the byte-level BPE pre-tokenizer failed (PCRE2 error {}) on '{}'", rc, excerpt_for_message(text));
        }
        const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
        const std::size_t from = ovector[0], to = ovector[1];
        if (to <= from) break;  // the pattern has no empty matches; guard anyway
        encode_piece(text.substr(from, to - from), ids);
        offset = to;
      }
      if (stop == std::string_view::npos) break;
      ids.push_back(end_of_text_);
      start = stop + special.size();
    }
  } catch (...) {
    pcre2_match_data_free(match);
    throw;
  }
  pcre2_match_data_free(match);
  return ids;
#endif
}

std::string ByteLevelBpe::decode(const std::vector<int32_t>& ids) const {
  static const auto inverse = [] {
    std::unordered_map<uint32_t, unsigned char> map;
    for (int b = 0; b < 256; ++b) map.emplace(alphabet().code_point[b], static_cast<unsigned char>(b));
    return map;
  }();
  std::string bytes;
  for (const int32_t id : ids) {
    if (id < 0 || id >= size() || id == end_of_text_) continue;
    const std::string& token = tokens_[static_cast<std::size_t>(id)];
    if (!is_valid_utf8(token)) {
      bytes += token;
      continue;
    }
    for (std::size_t i = 0; i < token.size();) {
      const std::size_t begin = i;
      const uint32_t cp = next_code_point(token, i);
      const auto it = inverse.find(cp);
      if (it != inverse.end()) bytes += static_cast<char>(it->second);
      else bytes.append(token, begin, i - begin);  // outside the byte alphabet: the character itself
    }
  }
  return lossy_utf8(bytes);
}

}  // namespace lseq::data
