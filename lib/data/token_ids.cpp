#include "data/token_ids.h"

#include <fmt/format.h>

#include <limits>

#include "data/utf8.h"

namespace lseq::data {

std::string parse_token_ids(std::string_view line, int vocab_size, std::vector<int32_t>& ids) {
  const int64_t limit = vocab_size > 0 ? vocab_size : int64_t{std::numeric_limits<int32_t>::max()} + 1;
  auto separator = [](char c) { return c == ' ' || c == '\t'; };
  for (std::size_t i = 0; i < line.size();) {
    if (separator(line[i])) {
      ++i;
      continue;
    }
    std::size_t end = i;
    while (end < line.size() && !separator(line[end])) ++end;
    const std::string_view word = line.substr(i, end - i);
    i = end;
    int64_t value = 0;  // stops growing once it reaches the limit, so no word can overflow it
    bool number = true;
    for (std::size_t k = word[0] == '-' ? 1 : 0; k < word.size() && number; ++k) {
      number = word[k] >= '0' && word[k] <= '9';
      if (number && value < limit) value = value * 10 + (word[k] - '0');
    }
    number = number && word.size() > (word[0] == '-' ? 1u : 0u);
    if (!number)
      return fmt::format("'{}' is not a token id (--no-spm-encode expects whitespace-separated numbers)",
                         excerpt_for_message(word));
    if (word[0] == '-') return fmt::format("token id {} is negative", excerpt_for_message(word));
    if (value >= limit) {
      if (vocab_size > 0)
        return fmt::format("token id {} is outside the vocabulary of {} entries", excerpt_for_message(word),
                           vocab_size);
      return fmt::format("token id {} is too large for a token id", excerpt_for_message(word));
    }
    ids.push_back(static_cast<int32_t>(value));
  }
  return "";
}

}  // namespace lseq::data
