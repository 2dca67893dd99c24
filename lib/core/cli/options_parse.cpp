// Reading options: config files, the command line, merging them over the defaults, and reporting mistakes as
// one line that names the option, where it was given and what would be valid.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "core/cli/marian_compat.h"
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
  for (App app : {App::train, App::translate, App::score, App::eval, App::bench})
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
  std::vector<std::string> words;    // empty: given without a value
};

// What CLI11 hands over for an option given without a value (a flag, "--normalize" alone).
const char kNoValue[] = "\x01(no value)";
// What "--opt=" (an empty value) is handed to CLI11 as: CLI11 reads "--opt=" as "--opt" without a value.
const char kEmptyValue[] = "\x01(empty)";
// Words one option may take (CLI11 treats more than 2^25 as "unlimited" and then stops at one value).
constexpr int kMaxWords = 1 << 24;

// An argument that CLI11 did not take: an unknown option, or a word that belongs to none.
GivenOption leftover(App app, const std::string& word) {
  GivenOption option;
  if (word.size() >= 3 && word.compare(0, 2, "--") == 0) {
    option.name = word.substr(2, word.find('=') == std::string::npos ? std::string::npos : word.find('=') - 2);
    option.typed = "--" + option.name;
    option.spec = find_option(option.name);
  } else if (word.size() >= 2 && word[0] == '-' && std::isalpha(static_cast<unsigned char>(word[1]))) {
    option.typed = option.name = word;
    option.spec = word.size() == 2 ? find_short_option(app, word[1]) : nullptr;
  } else {
    option.words.push_back(word);
  }
  return option;
}

// Splits argv into options and their words with CLI11, without judging the values yet (the registry does that,
// for files and the command line alike). Every option of `app` is a CLI11 option that takes its words as strings:
// CLI11 reads "--opt=value", "-b6", "-n0.6", negative numbers as values, lists that end at the next option or "--",
// and takes the one value a scalar needs even when it begins with "--" ("--sentencepiece-options --x=1"). A scalar
// may collect more words, so that "--dim-emb 512 256" is refused by the registry with both values named. Unknown
// options and stray words come back as leftovers, reported after --help had its chance.
std::vector<GivenOption> split_command_line(App app, int argc, const char* const* argv) {
  std::vector<GivenOption> given;
  CLI::App cli;
  cli.set_help_flag();  // --help is the registry's
  cli.allow_extras();
  for (const auto& spec : option_registry()) {
    if (!spec.accepted_by(app)) continue;
    std::string names = "--" + spec.name;
    if (spec.short_flag) names = std::string("-") + spec.short_flag + "," + names;
    const OptionSpec* s = &spec;
    CLI::Option* option = cli.add_option(names, [&given, s](const CLI::results_t& results) {
      GivenOption g;
      g.spec = s;
      g.name = s->name;
      g.typed = "--" + s->name;
      for (const auto& word : results)
        if (word != kNoValue) g.words.push_back(word == kEmptyValue ? std::string() : word);
      given.push_back(std::move(g));
      return true;
    });
    const bool value_optional = spec.type == OptionType::boolean || spec.implicit_value || spec.is_list();
    option->expected(value_optional ? 0 : 1, kMaxWords);
    option->default_str(kNoValue);
    option->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    option->trigger_on_parse();
  }
  // CLI11 takes the words last first.
  std::vector<std::string> words;
  for (int i = argc - 1; i >= 1; --i) {
    const std::string word = argv[i];
    const bool empty_value = word.size() > 3 && word.compare(0, 2, "--") == 0 && word.find('=') == word.size() - 1;
    if (empty_value) words.push_back(kEmptyValue);
    words.push_back(empty_value ? word.substr(0, word.size() - 1) : word);
  }
  try {
    cli.parse(words);
  } catch (const CLI::ArgumentMismatch&) {
    // CLI11 ran out of words for an option that needs a value: the last word of the line.
    GivenOption last = leftover(app, argv[argc - 1]);
    if (last.spec && last.spec->accepted_by(app))
      fail("{} needs a value ({})", ValueSource::command_line().describe(last.spec->name),
           type_description(last.spec->type));
    throw;
  } catch (const CLI::ParseError& e) {
    fail("the command line could not be read: {}", e.what());
  }
  for (const auto& word : cli.remaining()) given.push_back(leftover(app, word));
  return given;
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

// Defaults, then `preset` (Marian's --task), then `first_file` (if any), then the --config files in order, then the
// command line over them.
Options merge_layers(App app, const std::vector<GivenOption>& given, const std::string& first_file,
                     const YAML::Node& preset) {
  Options options = default_options(app);
  for (const auto& entry : preset) options.set(entry.first.Scalar(), entry.second);
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

// lstranslate reads the model directory's decoder.yml (written by lstrain) as the lowest config layer,
// so its beam size, normalization etc. apply unless a config file or the command line says otherwise.
// Marian's --task presets sit above the defaults, below every file and the command line.
Options merge_options(App app, const std::vector<GivenOption>& given, std::ostream& err) {
  const YAML::Node none(YAML::NodeType::Map);
  Options options = merge_layers(app, given, "", none);
  const YAML::Node preset =
      find_option("task")->accepted_by(app) ? task_preset_layer(app, options.get_strings("task")) : none;
  if (preset.size() > 0) options = merge_layers(app, given, "", preset);
  if (app == App::translate) {
    Options located = options;  // the model directory, also when given as Marian's --models
    std::ostringstream ignored;
    apply_marian_compat(app, located, ignored);
    if (located.has("model")) {
      const std::string decoder_config = located.get_string("model") + "/decoder.yml";
      std::error_code ec;
      if (std::filesystem::is_regular_file(decoder_config, ec))
        options = merge_layers(app, given, decoder_config, preset);
    }
  }
  apply_marian_compat(app, options, err);
  check_combination(app, options);
  return options;
}

// --dump-config minimal: only what differs from the defaults.
Options differing_from_defaults(App app, const Options& options) {
  const Options defaults = default_options(app);
  YAML::Node kept(YAML::NodeType::Map);
  for (const auto& entry : options.yaml()) {
    const std::string key = entry.first.Scalar();
    const YAML::Node base = defaults.yaml()[key];
    if (!base.IsDefined() || YAML::Dump(base) != YAML::Dump(entry.second)) kept[key] = entry.second;
  }
  return Options(kept);
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
  // Marian's decoder.yml: "relative-paths: true" makes its models and vocabs relative to the file's directory.
  if (values["relative-paths"].IsDefined() && values["relative-paths"].Scalar() == "true") {
    const std::filesystem::path dir = std::filesystem::path(path).parent_path();
    for (const char* key : {"models", "vocabs"}) {
      if (!values[key].IsDefined() || !values[key].IsSequence()) continue;
      for (std::size_t i = 0; i < values[key].size(); ++i) {
        const std::string entry = values[key][i].Scalar();
        if (!entry.empty() && entry[0] != '/') values[key][i] = (dir / entry).lexically_normal().string();
      }
    }
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
    // --help and --version work whatever else is on the line, even a line CLI11 cannot read.
    bool help = false, version = false;
    for (int i = 1; i < argc; ++i) {
      const std::string word = argv[i];
      help = help || word == "--help" || word == "-h";
      version = version || word == "--version";
    }
    if (help || version) {
      if (help) {
        print_help(app, out);
      } else {
        out << version_string() << "\n";
      }
      parsed.exit_now = true;
      return parsed;
    }
    std::vector<GivenOption> options = split_command_line(app, argc, argv);
    check_names(app, options);
    parsed.options = merge_options(app, options, err);
    if (find_option("dump-marian-compat")->accepted_by(app) && parsed.options.get_bool("dump-marian-compat")) {
      out << marian_compat_markdown();
      parsed.exit_now = true;
      return parsed;
    }
    if (parsed.options.has("dump-config")) {
      const bool minimal = parsed.options.get_string("dump-config") == "minimal";
      out << (minimal ? differing_from_defaults(app, parsed.options) : parsed.options).dump();
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
