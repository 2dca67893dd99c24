#include "core/cli/app_main.h"

#include <spdlog/spdlog.h>

#include <exception>
#include <iostream>

#include "core/cli/version.h"
#include "util/error.h"
#include "util/logging.h"

namespace lseq {

namespace {

// One write of the whole line: the ranks of a multi-device job share the terminal, and lines must not interleave.
void report(const char* message) {
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  line = "error: " + line + "\n";
  std::cerr.write(line.data(), static_cast<std::streamsize>(line.size()));
  std::cerr.flush();
}

}  // namespace

std::string format_command_line(int argc, const char* const* argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    std::string word = argv[i];
    bool quote = word.empty() || word.find_first_of(" \t'\"\\$") != std::string::npos;
    if (quote) {
      std::string escaped = "'";
      for (char c : word) escaped += c == '\'' ? std::string("'\\''") : std::string(1, c);
      word = escaped + "'";
    }
    line += (i ? " " : "") + word;
  }
  return line;
}

int app_main(App app, int argc, const char* const* argv, AppEntry entry) {
  try {
    ParsedOptions parsed = parse_options(app, argc, argv);
    if (parsed.exit_now) return parsed.exit_code;
    const Options& options = parsed.options;
    LogOptions log;
    if (options.has("log")) log.file = options.get_string("log");
    log.quiet = options.get_bool("quiet");
    log.level = options.get_string("log-level");
    setup_logging(log);
    spdlog::info("Command line: {}", format_command_line(argc, argv));
    spdlog::info("{}", version_string());
    return entry(options);
  } catch (const Error& e) {
    report(e.what());
  } catch (const std::exception& e) {
    report(e.what());
  } catch (...) {
    report("unexpected failure (not a standard exception)");
  }
  return 1;
}

}  // namespace lseq
