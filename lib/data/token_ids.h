#pragma once
// Token ids written as text, the input of --no-spm-encode: decimal numbers separated by spaces or tabs.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lseq::data {

// Appends the ids of `line` to `ids` and returns an empty string, or returns why the line is not ids (naming the
// first bad word): a word that is not a number, a negative number, or a number not below vocab_size (when it is
// > 0; else above the largest int32). Numbers of any length are read without overflow.
std::string parse_token_ids(std::string_view line, int vocab_size, std::vector<int32_t>& ids);

}  // namespace lseq::data
