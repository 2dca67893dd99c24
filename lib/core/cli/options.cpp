// Options: typed access to the merged values, --dump-config's YAML, defaults, and schedule counts ("5000u").
#include "core/cli/options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>

#include "core/cli/options_registry.h"
#include "core/cli/options_values.h"
#include "util/error.h"

namespace lseq {

namespace {

// Read-only lookup (operator[] on a non-const node would insert the key).
YAML::Node lookup(const YAML::Node& values, const std::string& key) {
  if (!values.IsMap()) return YAML::Node();
  const YAML::Node& map = values;
  YAML::Node node = map[key];
  return node.IsDefined() ? node : YAML::Node();
}

bool contains(const YAML::Node& values, const std::string& key) {
  const YAML::Node& map = values;
  return values.IsMap() && map[key].IsDefined();
}

[[noreturn]] void wrong_type(const std::string& key, const char* expected, const YAML::Node& node) {
  std::string text = node.IsScalar() ? node.Scalar() : node.IsSequence() ? "a list" : "a map";
  fail("option '{}' is not {} but '{}' (the code reads it with the wrong type)", key, expected, text);
}

std::vector<std::string> scalars(const std::string& key, const YAML::Node& node, const char* expected) {
  std::vector<std::string> out;
  if (node.IsNull()) return out;
  if (node.IsScalar()) return {node.Scalar()};
  if (!node.IsSequence()) wrong_type(key, expected, node);
  for (const auto& element : node) {
    if (!element.IsScalar()) wrong_type(key, expected, node);
    out.push_back(element.Scalar());
  }
  return out;
}

// Strings YAML would read back as null unless quoted.
bool looks_null(const std::string& text) {
  return text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL";
}

void emit_scalar(YAML::Emitter& out, const std::string& text) {
  if (looks_null(text)) {
    out << YAML::DoubleQuoted << text;
  } else {
    out << text;
  }
}

void emit_value(YAML::Emitter& out, const YAML::Node& node) {
  if (node.IsNull()) {
    out << YAML::Null;
  } else if (node.IsScalar()) {
    emit_scalar(out, node.Scalar());
  } else if (node.IsSequence() && std::all_of(node.begin(), node.end(), [](const YAML::Node& e) {
               return e.IsScalar();
             })) {
    out << YAML::Flow << YAML::BeginSeq;
    for (const auto& element : node) emit_scalar(out, element.Scalar());
    out << YAML::EndSeq;
  } else {
    out << node;
  }
}

}  // namespace

bool Options::has(const std::string& key) const { return !lookup(values_, key).IsNull(); }

namespace {
YAML::Node required(const YAML::Node& values, const std::string& key) {
  YAML::Node node = lookup(values, key);
  if (node.IsNull()) fail("option '{}' is not set; give --{} or set it in a config file", key, key);
  return node;
}
}  // namespace

bool Options::get_bool(const std::string& key) const {
  YAML::Node node = required(values_, key);
  bool value = false;
  if (!node.IsScalar() || !parse_bool_text(node.Scalar(), &value)) wrong_type(key, "true or false", node);
  return value;
}

int64_t Options::get_int(const std::string& key) const {
  YAML::Node node = required(values_, key);
  int64_t value = 0;
  if (!node.IsScalar() || !parse_int_text(node.Scalar(), &value)) wrong_type(key, "an integer", node);
  return value;
}

double Options::get_float(const std::string& key) const {
  YAML::Node node = required(values_, key);
  double value = 0;
  if (!node.IsScalar() || !parse_float_text(node.Scalar(), &value)) wrong_type(key, "a number", node);
  return value;
}

std::string Options::get_string(const std::string& key) const {
  YAML::Node node = required(values_, key);
  if (!node.IsScalar()) wrong_type(key, "a string", node);
  return node.Scalar();
}

std::vector<std::string> Options::get_strings(const std::string& key) const {
  return scalars(key, lookup(values_, key), "a list of strings");
}

std::vector<int64_t> Options::get_ints(const std::string& key) const {
  std::vector<int64_t> out;
  YAML::Node node = lookup(values_, key);
  for (const auto& text : scalars(key, node, "a list of integers")) {
    int64_t value = 0;
    if (!parse_int_text(text, &value)) wrong_type(key, "a list of integers", node);
    out.push_back(value);
  }
  return out;
}

std::vector<double> Options::get_floats(const std::string& key) const {
  std::vector<double> out;
  YAML::Node node = lookup(values_, key);
  for (const auto& text : scalars(key, node, "a list of numbers")) {
    double value = 0;
    if (!parse_float_text(text, &value)) wrong_type(key, "a list of numbers", node);
    out.push_back(value);
  }
  return out;
}

Schedule Options::get_schedule(const std::string& key) const {
  const OptionSpec* spec = find_option(key);
  std::string units = spec && !spec->schedule_units.empty() ? spec->schedule_units : "uet";
  return parse_schedule(get_string(key), units, fmt::format("option '{}'", key));
}

void Options::set(const std::string& key, const YAML::Node& value) {
  if (!values_.IsMap()) values_ = YAML::Node(YAML::NodeType::Map);
  values_[key] = YAML::Clone(value);
}

std::string Options::dump() const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  std::set<std::string> written;
  for (const auto& spec : option_registry()) {
    written.insert(spec.name);
    if (spec.command_line_only) continue;
    if (!contains(values_, spec.name)) continue;
    out << YAML::Key << spec.name << YAML::Value;
    emit_value(out, lookup(values_, spec.name));
  }
  if (values_.IsMap()) {
    for (const auto& entry : values_) {
      std::string key = entry.first.Scalar();
      if (written.count(key)) continue;
      out << YAML::Key << key << YAML::Value;
      emit_value(out, entry.second);
    }
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

Options default_options(App app) {
  YAML::Node values(YAML::NodeType::Map);
  for (const auto& spec : option_registry()) {
    if (!spec.accepted_by(app) || spec.name == "help" || spec.name == "version") continue;
    DefaultTokens tokens = spec.default_for(app);
    values[spec.name] = tokens ? value_from_words(spec, *tokens, ValueSource{"the option registry", 0}) : YAML::Node();
  }
  return Options(values);
}

Schedule parse_schedule(const std::string& text, const std::string& allowed_units, const std::string& what) {
  auto bad = [&]() {
    std::string units;
    for (size_t k = 0; k < allowed_units.size(); ++k) {
      char unit = allowed_units[k];
      const char* name = unit == 'u' ? "updates" : unit == 'e' ? "epochs" : "target labels";
      units += fmt::format("{}{} ({})", k == 0 ? "" : k + 1 == allowed_units.size() ? " or " : ", ", unit, name);
    }
    std::string examples = allowed_units.find('e') != std::string::npos ? "10e or 5000u" : "5000u or 5000";
    fail("{} must be a count such as {}: a whole number (K, M, G multiply by a thousand, million, billion) "
         "optionally followed by {}; got '{}'",
         what, examples, units, text);
  };
  size_t i = 0;
  int64_t count = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    if (count > (std::numeric_limits<int64_t>::max() - 9) / 10) bad();
    count = count * 10 + (text[i++] - '0');
  }
  if (i == 0) bad();
  int64_t multiplier = 1;
  if (i < text.size() && (text[i] == 'K' || text[i] == 'M' || text[i] == 'G')) {
    multiplier = text[i] == 'K' ? 1000 : text[i] == 'M' ? 1000000 : 1000000000;
    ++i;
  }
  if (count > std::numeric_limits<int64_t>::max() / multiplier) bad();
  Schedule schedule;
  schedule.count = count * multiplier;
  if (i < text.size()) {
    char unit = text[i++];
    if (allowed_units.find(unit) == std::string::npos || i != text.size()) bad();
    schedule.unit = unit == 'e' ? ScheduleUnit::epochs : unit == 't' ? ScheduleUnit::labels : ScheduleUnit::updates;
  }
  return schedule;
}

}  // namespace lseq
