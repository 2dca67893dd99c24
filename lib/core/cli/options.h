#pragma once
// Options of every lseq program (lstrain, lstranslate, lsscore, lseval and the benchmarks): Marian's names, YAML config files merged in order, the
// command line winning, --dump-config. Every option is declared once in the registry (options_registry.cpp)
// with its type, default, help text and the apps that accept it; values are checked against that type whether
// they come from a file or the command line, and errors name the option, the file, the line and what to do.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/train/frequency.h"

namespace lseq {

// The programs that read options. train, translate, score and serve work on a model directory (--model is
// required); eval is lseval; bench is every benchmark under bench/ (they share one set of options); serve is lsserve.
enum class App { train, translate, score, eval, bench, serve };

const char* app_name(App app);  // "lstrain", "lstranslate", "lsscore", "lseval", "lseq's benchmarks", "lsserve"
bool needs_model(App app);      // train, translate, score and serve

// Parses a count in training units (core/train/frequency.h); `allowed_units` lists the unit letters accepted
// (e.g. "ut"); throws lseq::Error naming `what` (e.g. "option 'after' in x.yaml line 3") when the text is not such
// a count.
Schedule parse_schedule(const std::string& text, const std::string& allowed_units = "uet",
                        const std::string& what = "value");

class Options {
 public:
  Options() = default;
  explicit Options(YAML::Node values) : values_(std::move(values)) {}

  bool has(const std::string& key) const;  // set (not null) after merging defaults, files and command line
  // Typed access; the registry guarantees the type, so a mismatch here is a programming error (lseq::Error).
  bool get_bool(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  std::vector<std::string> get_strings(const std::string& key) const;
  std::vector<int64_t> get_ints(const std::string& key) const;
  std::vector<double> get_floats(const std::string& key) const;
  Schedule get_schedule(const std::string& key) const;  // after, disp-freq, save-freq, valid-freq, lr-warmup...

  void set(const std::string& key, const YAML::Node& value);  // programmatic override (tests, model config)
  const YAML::Node& yaml() const { return values_; }
  std::string dump() const;  // the merged options as YAML, keys in registry order

 private:
  YAML::Node values_;
};

// What parse_options decided: run with the options, or exit now with this code (help, version, dump-config
// were printed, or an error was reported on stderr as one line).
struct ParsedOptions {
  Options options;
  bool exit_now = false;
  int exit_code = 0;
};

// Reads argv (argv[0] is the program), the --config files it names and the defaults of `app`. Prints --help,
// --version or --dump-config to stdout, an error as one "error: ..." line to stderr.
ParsedOptions parse_options(App app, int argc, const char* const* argv);
// The same, writing to the given streams (tests).
ParsedOptions parse_options(App app, int argc, const char* const* argv, std::ostream& out, std::ostream& err);

// The defaults of every option `app` accepts (what parse_options starts from).
Options default_options(App app);

// Loads one YAML config file and validates every key against the registry for `app` (used by parse_options,
// and to read the config stored in a model directory).
YAML::Node load_config_file(App app, const std::string& path);

// The defaults of `app` overlaid with one config file, e.g. the config stored in a model directory.
Options options_from_file(App app, const std::string& path);

}  // namespace lseq
