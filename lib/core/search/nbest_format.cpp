#include "core/search/nbest_format.h"

#include <fmt/format.h>

#include <charconv>

#include "data/utf8.h"

namespace lseq {

namespace {

std::vector<std::string> split_fields(const std::string& entry) {
  std::vector<std::string> fields;
  size_t begin = 0;
  while (true) {
    size_t bar = entry.find("|||", begin);
    fields.push_back(entry.substr(begin, bar == std::string::npos ? std::string::npos : bar - begin));
    if (bar == std::string::npos) break;
    begin = bar + 3;
  }
  return fields;
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

const char* kNBestShape = "'<line> ||| <translation> ||| <features> ||| <score>' (an n-best list from lstranslate --n-best)";

}  // namespace

std::string format_score(double score) { return fmt::format("{:g}", score); }

std::string format_word_scores(const std::vector<float>& scores) {
  std::string out = "WordScores=";
  for (float s : scores) out += fmt::format(" {:.5f}", s);
  return out;
}

std::string format_nbest_entry(int64_t line, const std::string& text, const Hypothesis& hypothesis,
                               bool word_scores) {
  std::string out = fmt::format("{} ||| {}", line, text);
  if (word_scores) out += " ||| " + format_word_scores(hypothesis.word_log_probs);
  out += fmt::format(" ||| F0= {} ||| {}", format_score(hypothesis.log_prob), format_score(hypothesis.score));
  return out;
}

std::string format_best(const std::string& text, const Hypothesis& hypothesis, bool word_scores) {
  if (!word_scores) return text;
  return text + " ||| " + format_word_scores(hypothesis.word_log_probs);
}

std::string parse_nbest_entry(const std::string& entry, NBestEntry& parsed) {
  const std::vector<std::string> fields = split_fields(entry);
  if (fields.size() < 3) return fmt::format("not an n-best entry; expected {}", kNBestShape);
  const std::string number = trim(fields[0]);
  int64_t line = 0;
  const char* end = number.data() + number.size();
  const auto [stop, error] = std::from_chars(number.data(), end, line);
  if (number.empty() || error != std::errc() || stop != end || line < 0)
    return fmt::format("'{}' is not a line number; expected {}", data::excerpt_for_message(number), kNBestShape);
  parsed = NBestEntry{line, trim(fields[1])};
  return "";
}

bool has_feature_field(const std::string& entry) { return split_fields(entry).size() >= 3; }

std::string add_nbest_feature(const std::string& entry, const std::string& feature, double score) {
  std::vector<std::string> fields = split_fields(entry);
  if (fields.size() < 3) return entry;  // no feature field
  size_t target = 2;
  for (size_t i = 2; i < fields.size(); ++i)
    if (trim(fields[i]).rfind("F0=", 0) == 0) target = i;
  std::string& field = fields[target];
  if (field.empty() || field.back() != ' ') field += ' ';
  field += fmt::format("{}= {} ", feature, format_score(score));
  std::string out;
  for (size_t i = 0; i < fields.size(); ++i) out += (i ? "|||" : "") + fields[i];
  return out;
}

}  // namespace lseq
