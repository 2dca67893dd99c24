// The programs' command line: parse_options over fuzzed argv words, with --config files from configs/.
// Input: one word a line; the first line names the program (lstrain, lstranslate, lsscore, lseval, bench; any
// other first line means lstrain and counts as a word); a word "@name" becomes the path of configs/name.
// Promises checked: a refusal is exactly one "error: " line on stderr, the last (not an internal error), after at
// most some "warning: " lines (Marian options with no effect here, a Marian model file name), and nothing on stdout;
// an accepted command line writes only such warning lines to stderr; --help, --version and --dump-config print to
// stdout; accepted options keep options_checks.h's.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/cli/options.h"
#include "fuzz_support.h"
#include "options_checks.h"

namespace {

using lseq::App;

// The lines of `text` that do not begin with "warning: " (each line ends with '\n'; a missing last '\n' counts as a
// line of its own, so that it is reported).
std::vector<std::string> lines_besides_warnings(const std::string& text) {
  std::vector<std::string> others;
  for (std::size_t begin = 0; begin < text.size();) {
    std::size_t end = text.find('\n', begin);
    const bool complete = end != std::string::npos;
    if (!complete) end = text.size();
    std::string line = text.substr(begin, end - begin);
    if (!complete || line.rfind("warning: ", 0) != 0) others.push_back(complete ? line : line + " (no newline)");
    begin = end + 1;
  }
  return others;
}

App app_named(const std::string& word, bool* named) {
  *named = true;
  if (word == "lstrain") return App::train;
  if (word == "lstranslate") return App::translate;
  if (word == "lsscore") return App::score;
  if (word == "lseval") return App::eval;
  if (word == "bench") return App::bench;
  *named = false;
  return App::train;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lseq::fuzz::quiet_logging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // Device and kernel files (/dev/zero as --config) would read forever: not a parser question.
  if (text.find("/dev") != std::string::npos || text.find("/proc") != std::string::npos ||
      text.find("/sys") != std::string::npos)
    return 0;
  std::vector<std::string> words;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    words.push_back(line.size() > 1 && line[0] == '@' ? std::string(LSEQ_SOURCE_DIR "/configs/") + line.substr(1)
                                                      : line);
  bool named = false;
  const App app = words.empty() ? App::train : app_named(words[0], &named);
  std::vector<const char*> argv{lseq::app_name(app)};
  for (size_t i = named ? 1 : 0; i < words.size(); ++i) argv.push_back(words[i].c_str());

  std::ostringstream out, err;
  const lseq::ParsedOptions parsed =
      lseq::parse_options(app, static_cast<int>(argv.size()), argv.data(), out, err);
  const std::string error = err.str();
  const std::vector<std::string> others = lines_besides_warnings(error);
  if (parsed.exit_code != 0) {
    LSEQ_FUZZ_EXPECT(parsed.exit_now, "a failed parse must exit");
    const bool one_error_last = others.size() == 1 && others[0].rfind("error: ", 0) == 0 &&
                                error.size() >= others[0].size() + 1 &&
                                error.compare(error.size() - others[0].size() - 1, std::string::npos,
                                              others[0] + "\n") == 0;
    LSEQ_FUZZ_EXPECT(one_error_last, "a refusal must be one 'error: ' line, the last, got: " + error);
    LSEQ_FUZZ_EXPECT(others[0].rfind("error: internal error", 0) != 0, "not a refusal but a bug: " + error);
    LSEQ_FUZZ_EXPECT(out.str().empty(), "a refusal printed to stdout");
    return 0;
  }
  LSEQ_FUZZ_EXPECT(others.empty(), "a successful parse wrote more than warnings to stderr: " + error);
  if (parsed.exit_now) {
    LSEQ_FUZZ_EXPECT(!out.str().empty(), "--help, --version or --dump-config printed nothing");
    return 0;
  }
  lseq::fuzz::check_accepted_options(parsed.options, app, "command line");
  return 0;
}
