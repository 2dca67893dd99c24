// decoder_count: --decoders as given, else by where the work runs; extra_decoder_count: only for the default count.
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

// lstranslate's extra decoders for a long input: none where --decoders was given, on the CPU, or where the default
// count did not load (a GPU without room for it); else up to 6 in all, at most the machine's cores.
TEST(DecoderCount, ExtraDecodersOnlyBesideTheDefaultCount) {
  EXPECT_EQ(extra_decoder_count(parse_translate({"-m", "model", "--decoders", "4"}), 4), 0);
  EXPECT_EQ(extra_decoder_count(parse_translate({"-m", "model", "--cpu"}), 1), 0);
  const Options defaults = parse_translate({"-m", "model"});
  if (!runs_on_gpu(defaults)) {
    EXPECT_EQ(extra_decoder_count(defaults, decoder_count(defaults)), 0);
    return;
  }
  const int loaded = decoder_count(defaults);
  EXPECT_EQ(extra_decoder_count(defaults, loaded - 1), 0) << "one of the default count failed to load";
  const int extra = extra_decoder_count(defaults, loaded);
  EXPECT_GE(extra, 0);
  EXPECT_LE(loaded + extra, 6);
}

}  // namespace
}  // namespace lseq
