// Marian's spellings on the command line and in files, the --task presets, and the registry's warnings and refusals.
#include <gtest/gtest.h>

#include "core/cli/marian_compat.h"
#include "core/cli/options_registry.h"
#include "options_test_util.h"

namespace lseq {
namespace {

using testing::run_parse;

Options parse_ok(App app, const std::vector<std::string>& args, std::string* err = nullptr) {
  auto run = run_parse(app, args);
  EXPECT_EQ(run.parsed.exit_code, 0) << run.err;
  if (err) *err = run.err;
  return run.parsed.options;
}

TEST(MarianCompat, ShortOptionsWithAttachedValuesAndValuesThatBeginWithDashes) {
  Options o = parse_ok(App::train, {"-m", "m", "-b6", "-n0.6", "--word-penalty", "-0.5", "--sentencepiece-options",
                                    "--character_coverage=1.0", "--cache-dir=", "--valid-metrics", "bleu-detok"});
  EXPECT_EQ(o.get_int("beam-size"), 6);
  EXPECT_DOUBLE_EQ(o.get_float("normalize"), 0.6);
  EXPECT_EQ(o.get_string("sentencepiece-options"), "--character_coverage=1.0");
  EXPECT_EQ(o.get_string("cache-dir"), "");
  EXPECT_EQ(o.get_strings("valid-metrics"), (std::vector<std::string>{"bleu"}));  // bleu-detok is sacreBLEU's bleu
}

TEST(MarianCompat, BareSmoothingTwoPrecisionsAndScheduleUnits) {
  Options o = parse_ok(App::train, {"-m", "m", "--exponential-smoothing", "--precision", "float16", "float32",
                                    "--lr-warmup", "2Mt", "--lr-decay-inv-sqrt", "1e", "2e", "--shuffle", "batches"});
  EXPECT_DOUBLE_EQ(o.get_float("exponential-smoothing"), 1e-4);
  EXPECT_EQ(o.get_strings("precision"), (std::vector<std::string>{"fp16", "fp32"}));
  EXPECT_EQ(o.get_schedule("lr-warmup").unit, ScheduleUnit::labels);
  EXPECT_EQ(o.get_strings("lr-decay-inv-sqrt"), (std::vector<std::string>{"1e", "2e"}));
  EXPECT_EQ(o.get_string("shuffle"), "batches");
  auto run = run_parse(App::train, {"-m", "m", "--precision", "float16", "float16"});
  EXPECT_NE(run.err.find("optimizer state in fp32"), std::string::npos) << run.err;
}

TEST(MarianCompat, TaskPresetSitsBelowFilesAndTheCommandLine) {
  Options o = parse_ok(App::train, {"-m", "m", "--task", "transformer-big", "--learn-rate", "0.001"});
  EXPECT_EQ(o.get_int("dim-emb"), 1024);
  EXPECT_EQ(o.get_string("transformer-ffn-activation"), "relu");
  EXPECT_TRUE(o.get_bool("mini-batch-fit"));
  EXPECT_DOUBLE_EQ(o.get_float("learn-rate"), 0.001);  // the command line wins
  auto run = run_parse(App::train, {"-m", "m", "--task", "transformer-huge"});
  EXPECT_NE(run.err.find("transformer-base|transformer-big"), std::string::npos) << run.err;
}

TEST(MarianCompat, RefusedOptionsSayWhatToUseAndIgnoredOnesWarn) {
  auto s2s = run_parse(App::train, {"-m", "m", "--type", "s2s"});
  EXPECT_EQ(s2s.parsed.exit_code, 1);
  EXPECT_NE(s2s.err.find("error: --type s2s is a Marian RNN model"), std::string::npos) << s2s.err;
  auto rnn = run_parse(App::train, {"-m", "m", "--dropout-rnn", "0.2"});
  EXPECT_NE(rnn.err.find("error: --dropout-rnn 0.2 belongs to Marian's RNN models"), std::string::npos) << rnn.err;
  std::string err;
  parse_ok(App::train, {"-m", "m", "--tempdir", "/scratch", "--dropout-rnn", "0"}, &err);  // 0: the default
  EXPECT_NE(err.find("warning: --tempdir /scratch has no effect here"), std::string::npos) << err;
  EXPECT_EQ(err.find("dropout-rnn"), std::string::npos) << err;
}

// Marian's decoder-only Transformer is --type lm-transformer; lseq's own spelling is lm (in Marian an RNN language
// model, which lseq does not build): both give the decoder-only Transformer, without a warning.
TEST(MarianCompat, LmTransformerAndLmAreTheDecoderOnlyTransformer) {
  for (const std::string type : {"lm", "lm-transformer"}) {
    std::string err;
    Options o = parse_ok(App::train, {"-m", "m", "--type", type, "--transformer-train-position-embeddings"}, &err);
    EXPECT_EQ(o.get_string("type"), "lm") << type;
    EXPECT_TRUE(o.get_bool("transformer-train-position-embeddings"));
    EXPECT_EQ(err, "") << type;
  }
  const std::string table = marian_compat_markdown();
  EXPECT_NE(table.find("| `--transformer-train-position-embeddings` | yes | Marian learns positions"),
            std::string::npos);
  EXPECT_NE(table.find("`lm-transformer` is Marian's decoder-only Transformer"), std::string::npos);
}

TEST(MarianCompat, ModelFilePathsAndDumpConfigModes) {
  std::string err;
  Options o = parse_ok(App::train, {"-m", "out/model.npz"}, &err);
  EXPECT_EQ(o.get_string("model"), "out");
  EXPECT_NE(err.find("the name 'model.npz' is not used"), std::string::npos) << err;
  auto npz = run_parse(App::translate, {"--models", "x/model.npz"});
  EXPECT_NE(npz.err.find("convert it"), std::string::npos) << npz.err;
  auto minimal = run_parse(App::train, {"-m", "m", "--seed", "7", "--dump-config", "minimal"});
  EXPECT_EQ(minimal.out, "model: m\nseed: 7\n");
  auto full = run_parse(App::train, {"-m", "m", "--dump-config"});
  EXPECT_NE(full.out.find("\nlearn-rate: 0.0003\n"), std::string::npos);
}

// Issue 26: where lseq keeps Marian's name but not its default, --help says so on the option's line.
TEST(MarianCompat, HelpSaysWhereDefaultsDifferFromMariansOnTheOptionsLine) {
  const std::string help = run_parse(App::train, {"--help"}).out;
  for (const std::string option : {"--learn-rate", "--max-length ", "--beam-size", "--normalize", "--enc-depth",
                                   "--dec-depth", "--seed", "--cost-type"}) {
    const std::size_t at = help.find(option);
    ASSERT_NE(at, std::string::npos) << option;
    const std::string line = help.substr(at, help.find('\n', at) - at);
    EXPECT_NE(line.find("[Marian: "), std::string::npos) << line;
  }
  // The decoder's max-length default (1000) is Marian's decoder default too: the note must not say otherwise.
  const std::string translate = run_parse(App::translate, {"--help"}).out;
  const std::size_t at = translate.find("--max-length ");
  ASSERT_NE(at, std::string::npos);
  const std::string line = translate.substr(at, translate.find('\n', at) - at);
  EXPECT_NE(line.find("(default: 1000)"), std::string::npos) << line;
  EXPECT_NE(line.find("for translating and scoring both use 1000"), std::string::npos) << line;
}

TEST(MarianCompat, TheTableCountsEveryMarianOption) {
  const std::string table = marian_compat_markdown();
  EXPECT_NE(table.find("lstrain of marian's " + std::to_string(marian_training_options().size()) + " options"),
            std::string::npos);
  EXPECT_NE(table.find("| `--mini-batch-fit` | yes |"), std::string::npos);
  EXPECT_NE(table.find("| `--tempdir` | accepted, no effect (warning) |"), std::string::npos);
  EXPECT_NE(table.find("| `--right-left` | refused (one line) |"), std::string::npos);
}

}  // namespace
}  // namespace lseq
