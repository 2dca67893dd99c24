#pragma once
// GPT-2's byte-level BPE tokenizer (vocab.json + merges.txt), encoding and decoding exactly as Hugging Face
// `tokenizers` does with a ByteLevel pre-tokenizer (no prefix space), a BPE model without unk and a ByteLevel decoder:
//   1. the text is split at each <|endoftext|> (the special token, its own id);
//   2. the rest is cut by GPT-2's pre-tokenizer regex (PCRE2, Unicode classes);
//   3. each piece's UTF-8 bytes become printable characters (GPT-2's bytes-to-unicode map), which are merged by the
//      ranks of merges.txt (the lowest-ranked adjacent pair first, leftmost first) and looked up in vocab.json.
// The ids are the tokenizer's own; data::Vocab shifts them behind lseq's fixed special ids (vocab.h).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lseq::data {

class ByteLevelBpe {
 public:
  static constexpr const char* kEndOfText = "<|endoftext|>";

  // False in a build without PCRE2 (LSEQ_BPE=AUTO where libpcre2-dev is missing): load() and parse() refuse.
  static bool available();
  // Reads vocab.json and merges.txt; anything malformed throws lseq::Error naming the file (and line).
  static ByteLevelBpe load(const std::string& vocab_path, const std::string& merges_path);
  // The same from the files' bytes; the names are only for messages.
  static ByteLevelBpe parse(std::string_view vocab_json, std::string_view merges_txt, const std::string& vocab_name,
                            const std::string& merges_name);

  ByteLevelBpe(ByteLevelBpe&&) noexcept;
  ByteLevelBpe& operator=(ByteLevelBpe&&) noexcept;
  ~ByteLevelBpe();

  // Text that is not UTF-8 throws lseq::Error.
  std::vector<int32_t> encode(std::string_view text) const;
  // The special token and ids outside the vocabulary are skipped; bytes that do not form UTF-8 become U+FFFD.
  std::string decode(const std::vector<int32_t>& ids) const;
  int size() const { return static_cast<int>(tokens_.size()); }
  int32_t end_of_text_id() const { return end_of_text_; }  // -1 when vocab.json has no <|endoftext|>
  const std::string& token(int32_t id) const { return tokens_.at(static_cast<std::size_t>(id)); }

 private:
  struct Regex;
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  ByteLevelBpe();
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;                     // id -> token (in the byte-to-unicode alphabet)
  std::unordered_map<std::string, int32_t> ids_;        // token -> id
  std::unordered_map<uint64_t, Merge> merges_;          // (left id << 32 | right id) -> rank, merged id
  int32_t byte_ids_[256] = {};                          // each byte's single-character token
  int32_t end_of_text_ = -1;
  std::unique_ptr<Regex> regex_;
};

}  // namespace lseq::data
