#pragma once
// The "13a" tokenizer of mteval-v13a.pl as sacreBLEU 2.x applies it (its default for BLEU), plus the Unicode
// whitespace handling of Python's str.split()/str.rstrip() that sacreBLEU's metrics rely on. Text is UTF-8; bytes
// that are not valid UTF-8 are treated as one character each (sacreBLEU would refuse such a file).
#include <string>
#include <string_view>
#include <vector>

namespace lseq::metrics {

// True for the code points Python's str.isspace() accepts (ASCII \t\n\v\f\r and space, U+001C..U+001F, U+0085,
// U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000).
bool is_python_whitespace(char32_t c);

// Decodes the UTF-8 character starting at text[pos] (pos < text.size()); returns its length in bytes. A byte that
// does not start a valid character counts as a character of length 1 with code point U+FFFD.
std::size_t decode_utf8_char(std::string_view text, std::size_t pos, char32_t& code_point);

// Python's text.split(): the maximal runs of non-whitespace, as views into text.
std::vector<std::string_view> split_python_whitespace(std::string_view text);

// sacreBLEU's Tokenizer13a applied to line.rstrip() (as BLEU does): the tokens joined by single spaces.
std::string tokenize_13a(std::string_view line);

}  // namespace lseq::metrics
