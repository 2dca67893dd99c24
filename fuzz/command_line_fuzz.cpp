// The programs' command line: parse_options over fuzzed argv words, with --config files from configs/.
// Input: one word a line; the first line names the program (lstrain, lstranslate, lsscore, lseval, bench; any
// other first line means lstrain and counts as a word); a word "@name" becomes the path of configs/name.
// Promises checked: a refusal is exactly one "error: " line on stderr (not an internal error) and nothing on
// stdout; --help, --version and --dump-config print to stdout only; accepted options keep options_checks.h's.
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
  if (parsed.exit_code != 0) {
    LSEQ_FUZZ_EXPECT(parsed.exit_now, "a failed parse must exit");
    LSEQ_FUZZ_EXPECT(error.rfind("error: ", 0) == 0 && error.find('\n') == error.size() - 1,
                     "a refusal must be one 'error: ' line, got: " + error);
    LSEQ_FUZZ_EXPECT(error.rfind("error: internal error", 0) != 0, "not a refusal but a bug: " + error);
    LSEQ_FUZZ_EXPECT(out.str().empty(), "a refusal printed to stdout");
    return 0;
  }
  LSEQ_FUZZ_EXPECT(error.empty(), "a successful parse wrote to stderr: " + error);
  if (parsed.exit_now) {
    LSEQ_FUZZ_EXPECT(!out.str().empty(), "--help, --version or --dump-config printed nothing");
    return 0;
  }
  lseq::fuzz::check_accepted_options(parsed.options, app, "command line");
  return 0;
}
