#pragma once
#include <cstddef>
#include <string_view>

namespace lseq::data {

// Byte offset of the first invalid UTF-8 sequence in text (overlong forms, surrogates and code points above
// U+10FFFF are invalid), or npos when the whole text is valid.
std::size_t find_invalid_utf8(std::string_view text);

inline bool is_valid_utf8(std::string_view text) { return find_invalid_utf8(text) == std::string_view::npos; }

}  // namespace lseq::data
