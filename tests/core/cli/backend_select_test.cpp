// decoder_count: --decoders as given, else by where the work runs.
#include <gtest/gtest.h>

#include <sstream>
#include <vector>

#include "core/cli/backend_select.h"
#include "core/cli/options.h"

namespace lseq {
namespace {

Options parse_translate(std::vector<const char*> argv) {
  std::ostringstream out, err;
  argv.insert(argv.begin(), "lstranslate");
  ParsedOptions parsed = parse_options(App::translate, static_cast<int>(argv.size()), argv.data(), out, err);
  EXPECT_FALSE(parsed.exit_now) << err.str();
  return parsed.options;
}

// --decoders: what is asked for; by default 1 on the CPU and, on a GPU, 2 to 4 (the machine's cores).
TEST(DecoderCount, DefaultsByWhereTheWorkRuns) {
  EXPECT_EQ(decoder_count(parse_translate({"-m", "model", "--decoders", "3"})), 3);
  EXPECT_EQ(decoder_count(parse_translate({"-m", "model", "--cpu"})), 1);
  EXPECT_FALSE(runs_on_gpu(parse_translate({"-m", "model", "--cpu"})));
  const Options defaults = parse_translate({"-m", "model"});
  if (runs_on_gpu(defaults)) {
    EXPECT_GE(decoder_count(defaults), 2);
    EXPECT_LE(decoder_count(defaults), 4);
  } else {
    EXPECT_EQ(decoder_count(defaults), 1);
  }
}

}  // namespace
}  // namespace lseq
