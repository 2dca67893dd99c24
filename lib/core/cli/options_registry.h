#pragma once
// The registry: every option of lstrain, lstranslate, lsscore, lseval and the benchmarks, declared once with its
// type, default, help text, checks and the apps that accept it. Parsing, --help, --dump-config and the typed
// accessors all read it.
#include <optional>
#include <string>
#include <vector>

#include "core/cli/options.h"

namespace lseq {

enum class OptionType { boolean, integer, floating, string, strings, ints, floats };
enum class OptionGroup { general, model, training, validation, translation, evaluation, benchmark };

// Bit of an app in OptionSpec::apps.
constexpr unsigned app_bit(App app) { return 1u << static_cast<unsigned>(app); }
constexpr unsigned kTrain = app_bit(App::train);
constexpr unsigned kTranslate = app_bit(App::translate);
constexpr unsigned kScore = app_bit(App::score);
constexpr unsigned kEval = app_bit(App::eval);
constexpr unsigned kBench = app_bit(App::bench);
constexpr unsigned kAllApps = kTrain | kTranslate | kScore;  // the programs that work on a model directory
constexpr unsigned kEveryProgram = kAllApps | kEval | kBench;

// A default is a list of value tokens in the same text form the command line uses ({} for an empty list);
// nullopt means "no default" (the option stays null unless given).
using DefaultTokens = std::optional<std::vector<std::string>>;

struct OptionSpec {
  std::string name;  // Marian's name, without dashes; also the YAML key
  OptionType type = OptionType::string;
  OptionGroup group = OptionGroup::general;
  unsigned apps = 0;  // app_bit() of every app that accepts it
  DefaultTokens default_value;
  std::string help;
  char short_flag = 0;             // e.g. 'm' for -m; 0 when none
  bool command_line_only = false;  // config, dump-config, help, version: never read from or written to files

  // Checks on each (element) value; the parser reports the option, where it came from and what is allowed.
  std::optional<double> min;         // numbers: value >= min
  std::optional<double> max;         // numbers: value <= max, or < max when max_exclusive
  bool max_exclusive = false;
  std::vector<std::string> choices;  // strings: one of these (after aliases)
  std::vector<std::pair<std::string, std::string>> aliases;  // accepted spelling -> canonical value
  std::string schedule_units;        // non-empty: "N[K|M|G][unit]" with unit one of these letters (see Schedule)
  std::string allowed_letters;       // non-empty: a string made of these letters only (e.g. "dan")
  bool split_words = false;          // list of strings: "topk 10" counts as two elements "topk", "10"
  std::optional<std::string> implicit_value;  // command line: value of "--opt" given without one

  // Marian compatibility (docs/marian-compat.md is generated from these; see core/cli/marian_compat.h).
  // A value note applies to one value of the option, or with an empty `value` to any value other than the default.
  struct ValueNote {
    std::string value;
    std::string text;
  };
  std::vector<ValueNote> ignored;  // accepted with a one-line warning "... has no effect here: <text>"
  std::vector<ValueNote> refused;  // refused with one line "... <text>"
  std::string marian_differs;      // how the meaning or the default differs from Marian's option (help and docs)
  bool lseq_only = false;          // no Marian option of this name

  // Where one app differs: its own default, the --help group it is listed in, or its help text (the benchmarks
  // give some product options a meaning of their own, e.g. --model).
  struct AppOverride {
    App app;
    std::optional<DefaultTokens> default_value;
    std::optional<OptionGroup> group;
    std::optional<std::string> help;
  };
  std::vector<AppOverride> overrides;

  bool accepted_by(App app) const { return (apps & app_bit(app)) != 0; }
  DefaultTokens default_for(App app) const;
  OptionGroup group_for(App app) const;
  const std::string& help_for(App app) const;
  bool is_list() const {
    return type == OptionType::strings || type == OptionType::ints || type == OptionType::floats;
  }
};

// Every option, in the order --help and --dump-config list them.
const std::vector<OptionSpec>& option_registry();

// The option with this name (no dashes), or nullptr.
const OptionSpec* find_option(const std::string& name);
// The option of `app` with this short flag (the letter after '-'), or nullptr. A letter names one option per
// program (lseval's -m is --metrics, the others' --model).
const OptionSpec* find_short_option(App app, char flag);

const char* group_title(OptionGroup group);  // "General options", ...
// "an integer", "a list of numbers", ...: how error messages name the expected type.
const char* type_description(OptionType type);

}  // namespace lseq
