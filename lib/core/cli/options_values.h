#pragma once
// Turning option values (YAML nodes from a file, or command-line words) into the canonical YAML form that Options
// stores, checking the registry's type and limits. Internal to the options module.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/cli/options_registry.h"

namespace lseq {

// Where a value came from, so that an error can say so.
struct ValueSource {
  std::string file;  // empty: the command line
  int line = 0;      // 1-based line in `file`

  static ValueSource command_line() { return {}; }
  static ValueSource in_file(const std::string& file, const YAML::Mark& mark) { return {file, mark.line + 1}; }
  // The position of `node` in the same file, or this one where the node has none.
  ValueSource at(const YAML::Node& node) const { return node.Mark().is_null() ? *this : in_file(file, node.Mark()); }
  // "option 'dim-emb' in x.yaml line 2" or "option '--dim-emb' on the command line"
  std::string describe(const std::string& option) const;
};

// Canonical value of `spec` from a YAML node read from a config file (scalar, sequence or null); `key_where` is
// the position of its key, used where the value itself carries none (an empty value).
YAML::Node value_from_yaml(const OptionSpec& spec, const YAML::Node& node, const ValueSource& key_where);
// Canonical value of `spec` from words (the command line, or a registry default): one word for a scalar.
YAML::Node value_from_words(const OptionSpec& spec, const std::vector<std::string>& words,
                            const ValueSource& where);

// Strict parsers of whole strings; false when the text is not such a value.
bool parse_bool_text(const std::string& text, bool* value);
bool parse_int_text(const std::string& text, int64_t* value);
bool parse_float_text(const std::string& text, double* value);  // finite numbers only

std::string format_float(double value);  // shortest text that reads back to the same double

}  // namespace lseq
