#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace lseq::data {

// Byte offset of the first invalid UTF-8 sequence in text (overlong forms, surrogates and code points above
// U+10FFFF are invalid), or npos when the whole text is valid.
std::size_t find_invalid_utf8(std::string_view text);

inline bool is_valid_utf8(std::string_view text) { return find_invalid_utf8(text) == std::string_view::npos; }

// A piece of input quoted in a one-line message: at most about max_bytes of it, cut with "..."; control characters
// and bytes of invalid UTF-8 are written as \xNN, so a message stays one printable line whatever the input held.
std::string excerpt_for_message(std::string_view text, std::size_t max_bytes = 40);

// A read line without the carriage returns at its end: the '\r' of a Windows line end, and the extra ones a file
// converted to CRLF twice carries ("text\r\r\n"); left in, they would reach the tokenizer as characters.
inline std::string_view without_carriage_returns(std::string_view line) {
  while (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

}  // namespace lseq::data
