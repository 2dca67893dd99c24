#pragma once
// A short, printable excerpt of text read from a damaged file, for an error message: quoted, control and non-ASCII
// bytes shown as '?', cut after max_chars with "...". A damaged file is never echoed whole.
#include <cstddef>
#include <string>
#include <string_view>

namespace lseq {

inline std::string quoted_excerpt(std::string_view text, std::size_t max_chars = 32) {
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < max_chars; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    out += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
  }
  return out + (text.size() > max_chars ? "'..." : "'");
}

}  // namespace lseq
