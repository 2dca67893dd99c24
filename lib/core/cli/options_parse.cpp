// Reading options: config files, the command line, merging them over the defaults, and reporting mistakes as
// one line that names the option, where it was given and what would be valid.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <set>

#include "core/cli/options.h"
#include "core/cli/options_help.h"
#include "core/cli/options_registry.h"
#include "core/cli/options_suggest.h"
#include "core/cli/options_values.h"
#include "core/cli/version.h"
#include "util/error.h"

namespace lseq {

namespace {

std::string apps_text(unsigned apps) {
  std::vector<std::string> names;
  for (App app : {App::train, App::translate, App::score, App::eval, App::bench, App::serve})
    if (apps & app_bit(app)) names.push_back(app_name(app));
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

// An option name that `app` does not accept, in a file (`where` names it) or on the command line.
[[noreturn]] void reject_option(App app, const std::string& name, const ValueSource& where) {
  bool on_command_line = where.file.empty();
  const OptionSpec* spec = find_option(name);
  if (spec && spec->accepted_by(app) && spec->command_line_only)
    fail("{} can only be given on the command line, not in a config file", where.describe(name));
  if (spec) {
    fail("{} is not accepted by {} (it is an option of {})", where.describe(name), app_name(app),
         apps_text(spec->apps));
  }
  std::vector<std::string> candidates;
  for (const auto& s : option_registry())
    if (s.accepted_by(app) && (on_command_line || !s.command_line_only)) candidates.push_back(s.name);
  std::string dashes = on_command_line ? "--" : "";
  std::string typed = on_command_line ? "'" + dashes + name + "'" : "'" + name + "'";
  std::string place = on_command_line ? "on the command line" : fmt::format("in {} line {}", where.file, where.line);
  std::string nearest = nearest_name(name, candidates);
  if (!nearest.empty()) fail("unknown option {} {}; did you mean '{}{}'?", typed, place, dashes, nearest);
  fail("unknown option {} {}; {} --help lists the options", typed, place, app_name(app));
}

// One option as given on the command line, before its value is checked.
struct GivenOption {
  std::string typed;                 // "--dim-emb", "-m"; empty for a stray word
  std::string name;                  // without dashes (long options) or as typed (short ones)
  const OptionSpec* spec = nullptr;  // nullptr: unknown (reported after --help had its chance)
  std::vector<std::string> words;
  bool with_equals = false;  // "--opt=value": exactly that one value
};

bool is_option_word(const std::string& word) {
  if (word.size() >= 3 && word[0] == '-' && word[1] == '-') {
    // A word with spaces that names no option is a value, e.g. "--character_coverage=1 --model_type=bpe" for
    // --sentencepiece-options (a single "--x" value can be given as --sentencepiece-options=--x).
    if (word.find_first_of(" \t") == std::string::npos) return true;
    size_t equals = word.find('=');
    return find_option(word.substr(2, equals == std::string::npos ? std::string::npos : equals - 2)) != nullptr;
  }
  // "-m" is an option; "-5" and "-0.5" are (negative) values.
  return word.size() >= 2 && word[0] == '-' && std::isalpha(static_cast<unsigned char>(word[1]));
}

// Splits argv into options and their words, without judging them yet, so that --help and --version work
// whatever else is on the line.
std::vector<GivenOption> split_command_line(App app, int argc, const char* const* argv) {
  std::vector<GivenOption> given;
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (!is_option_word(word)) {
      if (given.empty() || given.back().with_equals || given.back().typed.empty()) {
        GivenOption stray;
        stray.words.push_back(word);
        given.push_back(std::move(stray));
      } else {
        given.back().words.push_back(word);
      }
      continue;
    }
    GivenOption option;
    if (word[1] == '-') {
      option.name = word.substr(2);
      size_t equals = option.name.find('=');
      if (equals != std::string::npos) {
        option.words.push_back(option.name.substr(equals + 1));
        option.with_equals = true;
        option.name = option.name.substr(0, equals);
      }
      option.typed = "--" + option.name;
      option.spec = find_option(option.name);
    } else {
      option.typed = option.name = word;
      option.spec = word.size() == 2 ? find_short_option(app, word[1]) : nullptr;
    }
    given.push_back(std::move(option));
  }
  return given;
}

bool has_option(const std::vector<GivenOption>& options, const char* name) {
  return std::any_of(options.begin(), options.end(),
                     [name](const GivenOption& o) { return o.spec && o.spec->name == name; });
}

// Unknown options, stray words and options of other apps.
void check_names(App app, const std::vector<GivenOption>& options) {
  for (const auto& option : options) {
    if (option.typed.empty())
      fail("unexpected argument '{}' on the command line; options start with -- (see {} --help)", option.words[0],
           app_name(app));
    if (option.spec && option.spec->accepted_by(app)) continue;
    if (option.typed.rfind("--", 0) == 0) reject_option(app, option.name, ValueSource::command_line());
    if (option.spec) reject_option(app, option.spec->name, ValueSource::command_line());
    fail("unknown option '{}' on the command line; {} --help lists the options", option.typed, app_name(app));
  }
}

YAML::Node given_value(const GivenOption& option) {
  const OptionSpec& spec = *option.spec;
  ValueSource where = ValueSource::command_line();
  if (option.words.empty()) {
    if (spec.type == OptionType::boolean) return YAML::Node("true");
    if (spec.implicit_value) return value_from_words(spec, {*spec.implicit_value}, where);
    if (spec.is_list()) return YAML::Node(YAML::NodeType::Sequence);
    fail("{} needs a value ({})", where.describe(spec.name), type_description(spec.type));
  }
  return value_from_words(spec, option.words, where);
}

// Checks that involve more than one option.
void check_combination(App app, const Options& options) {
  if (app == App::train) {
    int64_t dim = options.get_int("dim-emb"), heads = options.get_int("transformer-heads");
    if (dim % heads != 0)
      fail("option 'dim-emb' ({}) must be a multiple of 'transformer-heads' ({})", dim, heads);
    // --after-epochs and --after-batches are Marian's older spellings of --after: two limits would leave it unclear
    // which one the user meant.
    if (options.get_schedule("after").count > 0) {
      for (const char* older : {"after-epochs", "after-batches"}) {
        if (options.get_int(older) > 0)
          fail("both --after ({}) and --{} ({}) are set; give one training limit (--after takes units: 10e, 5000u)",
               options.get_string("after"), older, options.get_int(older));
      }
    }
  }
}

std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

// Defaults, then `first_file` (if any), then the --config files in order, then the command line over them.
Options merge_layers(App app, const std::vector<GivenOption>& given, const std::string& first_file) {
  Options options = default_options(app);
  if (!first_file.empty()) {
    for (const auto& entry : load_config_file(app, first_file)) options.set(entry.first.Scalar(), entry.second);
  }
  for (const auto& option : given) {
    if (option.spec->name != "config") continue;
    for (const auto& path : given_value(option)) {
      for (const auto& entry : load_config_file(app, path.Scalar())) options.set(entry.first.Scalar(), entry.second);
    }
  }
  for (const auto& option : given) {
    if (option.spec->name == "help" || option.spec->name == "version") continue;
    options.set(option.spec->name, given_value(option));
  }
  return options;
}

// lstranslate (and lsserve) read the model directory's decoder.yml (written by lstrain) as the lowest config layer,
// so its beam size, normalization etc. apply unless a config file or the command line says otherwise.
Options merge_options(App app, const std::vector<GivenOption>& given) {
  Options options = merge_layers(app, given, "");
  if ((app == App::translate || app == App::serve) && options.has("model")) {
    const std::string decoder_config = options.get_string("model") + "/decoder.yml";
    std::error_code ec;
    if (std::filesystem::is_regular_file(decoder_config, ec)) options = merge_layers(app, given, decoder_config);
  }
  check_combination(app, options);
  return options;
}

}  // namespace

YAML::Node load_config_file(App app, const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("config file '{}' not found", path);
  if (std::filesystem::is_directory(path, ec)) fail("config file '{}' is a directory, not a YAML file", path);
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::ParserException& e) {
    fail("YAML syntax error in {} line {}: {}", path, e.mark.line + 1, e.msg);
  } catch (const YAML::BadFile&) {
    fail("cannot read config file '{}'", path);
  }
  YAML::Node values(YAML::NodeType::Map);
  if (root.IsNull()) return values;  // an empty file
  if (!root.IsMap())
    fail("config file {} must hold 'option: value' lines, found something else at line {}", path,
         root.Mark().line + 1);
  std::set<std::string> seen;
  for (const auto& entry : root) {
    ValueSource where = ValueSource::in_file(path, entry.first.Mark());
    if (!entry.first.IsScalar()) fail("{} line {}: an option name must be a plain word", path, where.line);
    std::string name = entry.first.Scalar();
    const OptionSpec* spec = find_option(name);
    if (!spec || !spec->accepted_by(app) || spec->command_line_only) reject_option(app, name, where);
    if (!seen.insert(name).second) fail("option '{}' is set twice in {} (again at line {})", name, path, where.line);
    // An empty value leaves an option that has no default for this app unset, whatever its type (--dump-config
    // writes such an option as null).
    bool unset = entry.second.IsNull() && !spec->default_for(app);
    values[name] = unset ? YAML::Node() : value_from_yaml(*spec, entry.second, where);
  }
  return values;
}

Options options_from_file(App app, const std::string& path) {
  Options options = default_options(app);
  YAML::Node file = load_config_file(app, path);
  for (const auto& entry : file) options.set(entry.first.Scalar(), entry.second);
  return options;
}

ParsedOptions parse_options(App app, int argc, const char* const* argv) {
  return parse_options(app, argc, argv, std::cout, std::cerr);
}

ParsedOptions parse_options(App app, int argc, const char* const* argv, std::ostream& out, std::ostream& err) {
  ParsedOptions parsed;
  try {
    std::vector<GivenOption> options = split_command_line(app, argc, argv);
    if (has_option(options, "help") || has_option(options, "version")) {
      if (has_option(options, "help")) {
        print_help(app, out);
      } else {
        out << version_string() << "\n";
      }
      parsed.exit_now = true;
      return parsed;
    }
    check_names(app, options);
    parsed.options = merge_options(app, options);
    if (parsed.options.get_bool("dump-config")) {
      out << parsed.options.dump();
      parsed.exit_now = true;
      return parsed;
    }
    if (needs_model(app) && !parsed.options.has("model"))
      fail("missing option --model (-m): the model directory {}", app == App::train ? "to train into"
                                                                                    : "to read the model from");
  } catch (const Error& e) {
    err << "error: " << one_line(e.what()) << "\n";
    parsed.exit_now = true;
    parsed.exit_code = 1;
  } catch (const std::exception& e) {
    // Not a refusal of bad input but a failure the parser did not foresee: say so, so that it gets reported.
    err << "error: internal error while reading the options (" << one_line(e.what())
        << "); please report it with the command line\n";
    parsed.exit_now = true;
    parsed.exit_code = 1;
  }
  return parsed;
}

}  // namespace lseq
