#include "core/cli/options_values.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <sstream>

#include "util/error.h"

namespace lseq {

std::string ValueSource::describe(const std::string& option) const {
  if (file.empty()) return fmt::format("option '--{}' on the command line", option);
  return fmt::format("option '{}' in {} line {}", option, file, line);
}

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string join(const std::vector<std::string>& words, const char* separator) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) out += (i ? separator : "") + words[i];
  return out;
}

OptionType element_type(OptionType type) {
  switch (type) {
    case OptionType::strings: return OptionType::string;
    case OptionType::ints: return OptionType::integer;
    case OptionType::floats: return OptionType::floating;
    default: return type;
  }
}

// The limits of a numeric option, as an error message says them.
std::string range_text(const OptionSpec& spec) {
  if (spec.min && spec.max && spec.max_exclusive)
    return fmt::format("in [{}, {})", format_float(*spec.min), format_float(*spec.max));
  if (spec.min && spec.max) return fmt::format("between {} and {}", format_float(*spec.min), format_float(*spec.max));
  if (spec.min) return fmt::format("at least {}", format_float(*spec.min));
  return fmt::format("at most {}", format_float(*spec.max));
}

void check_range(const OptionSpec& spec, double value, const std::string& text, const ValueSource& where) {
  bool below = spec.min && value < *spec.min;
  bool above = spec.max && (spec.max_exclusive ? value >= *spec.max : value > *spec.max);
  if (below || above) fail("{} must be {}, got {}", where.describe(spec.name), range_text(spec), text);
}

std::string check_string(const OptionSpec& spec, const std::string& text, const ValueSource& where) {
  // A carriage return is a Windows line end in a script or a file, not part of a value, and --dump-config could not
  // write one at the end of a value so that it reads back (YAML takes it for the end of the line).
  if (text.find('\r') != std::string::npos)
    fail("{} holds a carriage return (a Windows line end?); remove it", where.describe(spec.name));
  std::string value = text;
  for (const auto& [spelling, canonical] : spec.aliases)
    if (value == spelling) value = canonical;
  if (!spec.choices.empty() && std::find(spec.choices.begin(), spec.choices.end(), value) == spec.choices.end()) {
    std::string also;
    if (!spec.aliases.empty()) {
      std::vector<std::string> spellings;
      for (const auto& alias : spec.aliases) spellings.push_back(alias.first);
      also = " (or " + join(spellings, "|") + ")";
    }
    fail("{} must be one of {}{}, got '{}'", where.describe(spec.name), join(spec.choices, "|"), also, text);
  }
  if (!spec.allowed_letters.empty()) {
    for (char c : value)
      if (spec.allowed_letters.find(c) == std::string::npos)
        fail("{} must be made of the letters {} only, got '{}'", where.describe(spec.name), spec.allowed_letters,
             text);
  }
  if (!spec.schedule_units.empty()) parse_schedule(value, spec.schedule_units, where.describe(spec.name));
  return value;
}

// One scalar (or one list element) in canonical text form.
std::string canonical_element(const OptionSpec& spec, const std::string& text, const ValueSource& where) {
  auto type_error = [&]() {
    fail("{} must be {}, got '{}'", where.describe(spec.name), type_description(spec.type), text);
  };
  switch (element_type(spec.type)) {
    case OptionType::boolean: {
      bool value = false;
      if (!parse_bool_text(text, &value)) type_error();
      return value ? "true" : "false";
    }
    case OptionType::integer: {
      int64_t value = 0;
      if (!parse_int_text(text, &value)) type_error();
      check_range(spec, static_cast<double>(value), text, where);
      return std::to_string(value);
    }
    case OptionType::floating: {
      double value = 0;
      if (!parse_float_text(text, &value)) type_error();
      check_range(spec, value, text, where);
      return format_float(value);
    }
    default: return check_string(spec, text, where);
  }
}

std::vector<std::string> split_on_spaces(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

}  // namespace

YAML::Node value_from_words(const OptionSpec& spec, const std::vector<std::string>& words,
                            const ValueSource& where) {
  if (!spec.is_list()) {
    if (words.size() != 1)
      fail("{} takes one value, got {}: '{}' (quote a value that contains spaces)", where.describe(spec.name),
           words.size(), join(words, "' '"));
    return YAML::Node(canonical_element(spec, words[0], where));
  }
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& word : words) {
    if (spec.split_words) {
      for (const auto& piece : split_on_spaces(word)) list.push_back(canonical_element(spec, piece, where));
    } else {
      list.push_back(canonical_element(spec, word, where));
    }
  }
  return list;
}

YAML::Node value_from_yaml(const OptionSpec& spec, const YAML::Node& node, const ValueSource& key_where) {
  // An empty value's own position is where the next line starts; report its key's line instead.
  ValueSource where = node.IsNull() ? key_where : key_where.at(node);
  if (node.IsNull()) {
    // An empty value clears a list or a string; an option without a default goes back to "not set". The empty
    // string is checked as one given in quotes is: a schedule (valid-freq) or a choice (type) cannot be empty.
    if (spec.is_list()) return YAML::Node(YAML::NodeType::Sequence);
    if (spec.type == OptionType::string) return spec.default_value ? value_from_words(spec, {""}, where) : YAML::Node();
    fail("{} must be {}, got an empty value", where.describe(spec.name), type_description(spec.type));
  }
  if (node.IsMap())
    fail("{} must be {}, got a map", where.describe(spec.name), type_description(spec.type));
  if (node.IsScalar()) {
    // A list given as one scalar: one element, or several when its words are numbers ("0.9 0.98 1e-09").
    std::vector<std::string> words{node.Scalar()};
    if (spec.type == OptionType::ints || spec.type == OptionType::floats) words = split_on_spaces(node.Scalar());
    return value_from_words(spec, words, where);
  }
  // A sequence
  if (!spec.is_list())
    fail("{} must be {}, got a list", where.describe(spec.name), type_description(spec.type));
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& element : node) {
    ValueSource element_where = where.at(element);
    if (!element.IsScalar())
      fail("{} must be {}, got a nested list or map", element_where.describe(spec.name),
           type_description(spec.type));
    for (const auto& value : value_from_words(spec, {element.Scalar()}, element_where)) list.push_back(value);
  }
  return list;
}

bool parse_bool_text(const std::string& text, bool* value) {
  std::string t = lower(text);
  if (t == "true" || t == "yes" || t == "on" || t == "1") return *value = true, true;
  if (t == "false" || t == "no" || t == "off" || t == "0") return *value = false, true;
  return false;
}

bool parse_int_text(const std::string& text, int64_t* value) {
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (begin != end && *begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, *value);
  return ec == std::errc() && ptr == end && begin != end;
}

bool parse_float_text(const std::string& text, double* value) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) return false;
  // Only decimal numbers: no hex floats, "inf" or "nan".
  for (char c : text)
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return false;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (*begin == '+') ++begin;
  auto [ptr, ec] = std::from_chars(begin, end, *value);  // unlike strtod, independent of the locale
  return ec == std::errc() && ptr == end && begin != end && std::isfinite(*value);
}

std::string format_float(double value) { return fmt::format("{}", value); }

}  // namespace lseq
