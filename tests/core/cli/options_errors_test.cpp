// Mistakes in config files and on the command line: exit code 1 and ONE "error: ..." line on stderr that names
// the option, the file and line (or "on the command line") and what would be valid.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/cli/options.h"
#include "core/cli/options_test_util.h"

namespace lseq {
namespace {

using testing::run_parse;
using testing::TempDir;

// Runs the parser expecting an error, checks the one-line form, and returns the message.
std::string error_of(App app, const std::vector<std::string>& args) {
  auto run = run_parse(app, args);
  EXPECT_TRUE(run.parsed.exit_now);
  EXPECT_NE(run.parsed.exit_code, 0);
  EXPECT_EQ(run.out, "");
  EXPECT_EQ(run.err.rfind("error: ", 0), 0u) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  return run.err;
}

void expect_parts(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: "
                                                                                  << message;
}

TEST(OptionErrors, UnknownKeyInFileNamesFileLineAndNearestKey) {
  TempDir dir("unknown");
  std::string file = dir.write("x.yaml", "dim-emb: 256\n# a comment\ndim-embb: 3\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", file}),
               {"unknown option 'dim-embb' in " + file + " line 3; did you mean 'dim-emb'?"});
  // A shortened name finds the option that contains it.
  std::string heads = dir.write("h.yaml", "heads: 4\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", heads}), {"'heads'", "line 1", "'transformer-heads'"});
  // Nothing near: no guess, but a pointer to --help.
  std::string far = dir.write("far.yaml", "seed: 1\nqqqqqqqqqqqq: 1\n");
  std::string message = error_of(App::train, {"-m", "m", "-c", far});
  expect_parts(message, {"'qqqqqqqqqqqq'", "line 2", "--help"});
  EXPECT_EQ(message.find("did you mean"), std::string::npos);
}

TEST(OptionErrors, UnknownCommandLineOptionSuggestsTheNearest) {
  expect_parts(error_of(App::train, {"-m", "m", "--dim-embb", "5"}),
               {"unknown option '--dim-embb' on the command line; did you mean '--dim-emb'?"});
  expect_parts(error_of(App::translate, {"-m", "m", "--beam-sise", "5"}), {"'--beam-size'"});
  expect_parts(error_of(App::train, {"-m", "m", "-q"}), {"unknown option '-q'"});
  expect_parts(error_of(App::train, {"stray", "-m", "m"}), {"unexpected argument 'stray'"});
  expect_parts(error_of(App::train, {"-m", "my", "model"}), {"'--model'", "one value", "'my' 'model'"});
}

TEST(OptionErrors, WrongTypeInFileNamesKeyFileLineAndExpectedType) {
  TempDir dir("type");
  std::string file = dir.write("x.yaml", "seed: 5\ndim-emb: abc\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", file}),
               {"option 'dim-emb' in " + file + " line 2 must be an integer, got 'abc'"});
  std::string real = dir.write("f.yaml", "learn-rate: fast\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", real}), {"'learn-rate'", "line 1", "must be a number", "'fast'"});
  std::string flag = dir.write("b.yaml", "\n\ntied-embeddings: maybe\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", flag}), {"'tied-embeddings'", "line 3", "true or false"});
  // A bad list element is reported at its own line.
  std::string list = dir.write("l.yaml", "dim-vocabs:\n  - 8000\n  - lots\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", list}),
               {"option 'dim-vocabs' in " + list + " line 3 must be a list of integers, got 'lots'"});
  std::string seq = dir.write("s.yaml", "dim-emb: [1, 2]\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", seq}), {"'dim-emb'", "line 1", "an integer", "a list"});
  std::string empty = dir.write("e.yaml", "seed: 1\nenc-depth:\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", empty}), {"'enc-depth'", "line 2", "an integer"});
}

TEST(OptionErrors, WrongTypeOnTheCommandLine) {
  expect_parts(error_of(App::train, {"-m", "m", "--dim-emb", "abc"}),
               {"option '--dim-emb' on the command line must be an integer, got 'abc'"});
  expect_parts(error_of(App::train, {"-m", "m", "--dim-emb", "12.5"}), {"must be an integer", "'12.5'"});
  expect_parts(error_of(App::translate, {"-m", "m", "-n", "nan"}), {"'--normalize'", "must be a number"});
  expect_parts(error_of(App::train, {"-m", "m", "--devices", "0", "x"}),
               {"'--devices'", "on the command line", "a list of integers", "'x'"});
  expect_parts(error_of(App::train, {"-m", "m", "--dim-emb", "512", "256"}), {"'--dim-emb'", "one value"});
  expect_parts(error_of(App::train, {"-m", "m", "--dim-emb"}), {"'--dim-emb'", "needs a value"});
  expect_parts(error_of(App::train, {"-m", "m", "--cpu", "perhaps"}), {"'--cpu'", "true or false", "'perhaps'"});
}

// Found by fuzz/command_line_fuzz.cpp: "--model model\r" (a script with Windows line ends) was accepted, and its
// --dump-config read back as "model". A carriage return in a value is refused, naming the option.
TEST(OptionErrors, CarriageReturnInAValueIsRefused) {
  expect_parts(error_of(App::translate, {"-m", "model\r"}), {"'--model'", "carriage return", "Windows line end"});
  expect_parts(error_of(App::train, {"-m", "m", "--vocabs", "a.spm", "b\r.spm"}), {"'--vocabs'", "carriage return"});
  TempDir dir("carriage");
  std::string file = dir.write("escaped.yaml", "seed: 1\nlog: \"train\\r\"\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", file}), {"'log'", "line 2", "carriage return"});
  // A config file with Windows line ends reads as any other.
  std::string crlf = dir.write("crlf.yaml", "seed: 7\r\nlog: train.log\r\n");
  auto run = run_parse(App::train, {"-m", "m", "-c", crlf});
  ASSERT_EQ(run.parsed.exit_code, 0) << run.err;
  EXPECT_EQ(run.parsed.options.get_string("log"), "train.log");
}

TEST(OptionErrors, MissingConfigFileAndYamlSyntaxError) {
  TempDir dir("files");
  std::string missing = dir.path("nowhere.yaml");
  expect_parts(error_of(App::train, {"-m", "m", "-c", missing}), {missing, "not found"});
  std::string broken = dir.write("broken.yaml", "seed: 1\ndim-emb: 512\n  bad: indentation: here\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", broken}), {"YAML syntax error in " + broken + " line 3"});
  std::string list = dir.write("list.yaml", "- seed\n- 1\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", list}), {list, "option: value"});
  std::string twice = dir.write("twice.yaml", "seed: 1\nseed: 2\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", twice}), {"'seed'", "twice", "line 2"});
  std::string nested = dir.write("nested.yaml", "config: [other.yaml]\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", nested}), {"'config'", "command line"});
  expect_parts(error_of(App::train, {"-m", "m", "-c", dir.path("")}), {"directory"});
}

TEST(OptionErrors, OutOfRangeNamesTheAllowedValues) {
  expect_parts(error_of(App::train, {"-m", "m", "--transformer-dropout", "1"}),
               {"'--transformer-dropout'", "must be in [0, 1)", "got 1"});
  expect_parts(error_of(App::train, {"-m", "m", "--label-smoothing", "-0.1"}), {"in [0, 1)"});
  expect_parts(error_of(App::train, {"-m", "m", "--dim-emb", "-512"}), {"'--dim-emb'", "between 1 and 65536", "-512"});
  expect_parts(error_of(App::translate, {"-m", "m", "--beam-size", "0"}), {"'--beam-size'", "between 1 and 1024"});
  expect_parts(error_of(App::train, {"-m", "m", "--precision", "fp8"}),
               {"'--precision'", "fp32|bf16|fp16", "float32", "'fp8'"});
  expect_parts(error_of(App::train, {"-m", "m", "--transformer-ffn-activation", "tanh"}), {"relu|gelu|swish"});
  expect_parts(error_of(App::train, {"-m", "m", "--valid-metrics", "cross-entropy", "meteor"}),
               {"'--valid-metrics'", "bleu", "'meteor'"});
  expect_parts(error_of(App::train, {"-m", "m", "--transformer-postprocess", "dax"}), {"letters dan"});
  expect_parts(error_of(App::train, {"-m", "m", "--after", "10x"}), {"'--after'", "10e", "'10x'"});
  expect_parts(error_of(App::train, {"-m", "m", "--lr-warmup", "2x"}), {"'--lr-warmup'", "'2x'"});
  expect_parts(error_of(App::train, {"-m", "m", "--dim-emb", "500"}), {"'dim-emb'", "'transformer-heads'"});
  TempDir dir("range");
  std::string file = dir.write("r.yaml", "seed: 3\nprecision: float64\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", file}), {"'precision' in " + file + " line 2", "fp32|bf16|fp16"});
}

TEST(OptionErrors, AnOptionOfAnotherAppIsRejectedClearly) {
  expect_parts(error_of(App::translate, {"-m", "m", "--learn-rate", "0.1"}),
               {"'--learn-rate' on the command line is not accepted by lstranslate (it is an option of lstrain)"});
  expect_parts(error_of(App::train, {"-m", "m", "--output-sampling", "topk", "4"}),
               {"'--output-sampling'", "not accepted by lstrain", "lstranslate"});
  expect_parts(error_of(App::translate, {"-m", "m", "--summary"}), {"not accepted by lstranslate", "lsscore"});
  TempDir dir("apps");
  std::string file = dir.write("train.yaml", "dim-emb: 512\nlearn-rate: 0.1\n");
  expect_parts(error_of(App::score, {"-m", "m", "-c", file}),
               {"option 'dim-emb' in " + file + " line 1 is not accepted by lsscore", "lstrain"});
}

// Sizes beyond what any machine could run, or beyond the types that count them, are refused by the parser in one
// line naming the option and the limit (before, they failed later in an allocation or hung in planning).
TEST(OptionErrors, SizesAboveTheLimitsNameTheOptionAndTheLimit) {
  expect_parts(error_of(App::train, {"-m", "m", "--mini-batch-words", "1000000000000"}),
               {"'--mini-batch-words'", "between 0 and", "1000000000000"});
  expect_parts(error_of(App::train, {"-m", "m", "--max-length", "2147483647"}),
               {"'--max-length'", "between 1 and 8192", "2147483647"});
  expect_parts(error_of(App::translate, {"-m", "m", "--cpu-threads", "100000"}), {"'--cpu-threads'", "100000"});
  expect_parts(error_of(App::train, {"-m", "m", "--enc-depth", "100000"}), {"'--enc-depth'", "100000"});
  TempDir dir("limits");
  std::string file = dir.write("big.yaml", "dim-emb: 1000000000\n");
  expect_parts(error_of(App::train, {"-m", "m", "-c", file}), {"'dim-emb'", file, "line 1", "1000000000"});
  // A value at the limit is accepted.
  EXPECT_FALSE(run_parse(App::train, {"-m", "m", "--max-length", "8192"}).parsed.exit_now);
}

TEST(OptionErrors, AfterAndItsOlderSpellingsTogetherAreRefused) {
  expect_parts(error_of(App::train, {"-m", "m", "--after", "2e", "--after-epochs", "3"}),
               {"--after (2e)", "--after-epochs (3)", "one training limit"});
  expect_parts(error_of(App::train, {"-m", "m", "--after", "100u", "--after-batches", "5"}), {"--after-batches"});
  EXPECT_FALSE(run_parse(App::train, {"-m", "m", "--after-epochs", "3"}).parsed.exit_now);
}

}  // namespace
}  // namespace lseq
