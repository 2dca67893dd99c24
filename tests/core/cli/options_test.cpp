// Options: merging defaults, config files and the command line; lists; per-app options and defaults;
// --dump-config round trips; --help and --version; the presets in configs/.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/cli/app_main.h"
#include "core/cli/options.h"
#include "core/cli/options_registry.h"
#include "core/cli/options_test_util.h"
#include "core/cli/version.h"
#include "util/error.h"

namespace lseq {
namespace {

using testing::run_parse;
using testing::TempDir;

Options parse_quietly(App app, const std::vector<std::string>& args) {
  auto run = run_parse(app, args);
  EXPECT_FALSE(run.parsed.exit_now) << run.err;
  EXPECT_EQ(run.err, "");
  return run.parsed.options;
}

TEST(Options, FilesMergeInOrderAndTheCommandLineWins) {
  TempDir dir("merge");
  std::string a = dir.write("a.yaml", "dim-emb: 256\nenc-depth: 3\nlearn-rate: 0.001\n");
  std::string b = dir.write("b.yaml", "dim-emb: 384\ndec-depth: 2\n");

  Options ab = parse_quietly(App::train, {"-m", "model", "--config", a, b, "--dec-depth", "4"});
  EXPECT_EQ(ab.get_int("dim-emb"), 384);  // b after a
  EXPECT_EQ(ab.get_int("enc-depth"), 3);  // only in a
  EXPECT_EQ(ab.get_int("dec-depth"), 4);  // command line over b
  EXPECT_DOUBLE_EQ(ab.get_float("learn-rate"), 0.001);
  EXPECT_EQ(ab.get_int("transformer-heads"), 8);  // default, in neither file

  Options ba = parse_quietly(App::train, {"-m", "model", "-c", b, a});
  EXPECT_EQ(ba.get_int("dim-emb"), 256);
  EXPECT_EQ(ba.get_int("dec-depth"), 2);

  // The command line wins wherever it stands, and repeated -c accumulate files.
  Options before = parse_quietly(App::train, {"--dim-emb=128", "-m", "model", "-c", a, "-c", b});
  EXPECT_EQ(before.get_int("dim-emb"), 128);
  EXPECT_EQ(before.get_int("enc-depth"), 3);
  EXPECT_EQ(before.get_int("dec-depth"), 2);
  EXPECT_EQ(before.get_string("model"), "model");
}

TEST(Options, ListsFromFilesAndCommandLine) {
  TempDir dir("lists");
  std::string file = dir.write("lists.yaml",
                               "train-sets: [corpus.de, corpus.en]\n"
                               "vocabs:\n  - spm.de\n  - spm.en\n"
                               "valid-sets: single.txt\n"
                               "optimizer-params: 0.9 0.99 1e-8\n"
                               "dim-vocabs: [1000, 2000]\n");
  Options options = parse_quietly(App::train, {"-m", "m", "-c", file, "--devices", "2", "3", "-t", "x.de", "x.en"});
  EXPECT_EQ(options.get_strings("train-sets"), (std::vector<std::string>{"x.de", "x.en"}));  // replaced
  EXPECT_EQ(options.get_strings("vocabs"), (std::vector<std::string>{"spm.de", "spm.en"}));
  EXPECT_EQ(options.get_strings("valid-sets"), (std::vector<std::string>{"single.txt"}));
  EXPECT_EQ(options.get_ints("dim-vocabs"), (std::vector<int64_t>{1000, 2000}));
  EXPECT_EQ(options.get_ints("devices"), (std::vector<int64_t>{2, 3}));
  auto params = options.get_floats("optimizer-params");
  ASSERT_EQ(params.size(), 3u);
  EXPECT_DOUBLE_EQ(params[0], 0.9);
  EXPECT_DOUBLE_EQ(params[1], 0.99);
  EXPECT_DOUBLE_EQ(params[2], 1e-8);

  // An option given without words clears a list; words of output-sampling split on spaces.
  Options cleared = parse_quietly(App::train, {"-m", "m", "-c", file, "--valid-sets"});
  EXPECT_TRUE(cleared.get_strings("valid-sets").empty());
  Options sampling = parse_quietly(App::translate, {"-m", "m", "--output-sampling", "topk 10", "temperature", "0.7"});
  EXPECT_EQ(sampling.get_strings("output-sampling"),
            (std::vector<std::string>{"topk", "10", "temperature", "0.7"}));
}

TEST(Options, ValuesOfEachTypeFromTheCommandLine) {
  Options options = parse_quietly(App::translate, {"-m", "m", "--word-penalty", "-0.5", "-b", "6", "--n-best", "-n",
                                                   "--word-scores=false", "--precision", "float16", "-i", "a.txt"});
  EXPECT_DOUBLE_EQ(options.get_float("word-penalty"), -0.5);  // a negative number is a value, not an option
  EXPECT_EQ(options.get_int("beam-size"), 6);
  EXPECT_TRUE(options.get_bool("n-best"));
  EXPECT_DOUBLE_EQ(options.get_float("normalize"), 1.0);  // -n alone
  EXPECT_FALSE(options.get_bool("word-scores"));
  EXPECT_EQ(options.get_strings("precision"), (std::vector<std::string>{"fp16"}));  // Marian's spelling, normalised
  EXPECT_EQ(options.get_strings("input"), (std::vector<std::string>{"a.txt"}));

  Options bf = parse_quietly(App::score, {"-m", "m", "--precision", "bfloat16", "--quiet", "true"});
  EXPECT_EQ(bf.get_strings("precision"), (std::vector<std::string>{"bf16"}));
  EXPECT_TRUE(bf.get_bool("quiet"));
}

TEST(Options, PerAppDefaults) {
  Options train = default_options(App::train);
  Options translate = default_options(App::translate);
  Options score = default_options(App::score);
  EXPECT_DOUBLE_EQ(translate.get_float("normalize"), 0.6);
  EXPECT_DOUBLE_EQ(score.get_float("normalize"), 0.0);
  EXPECT_EQ(train.get_int("mini-batch"), 0);
  EXPECT_EQ(translate.get_int("mini-batch"), 16);
  EXPECT_EQ(train.get_int("mini-batch-words"), 4096);
  EXPECT_EQ(score.get_int("mini-batch-words"), 0);
  // Architecture options belong to lstrain only; lstranslate and lsscore read them from the model.
  EXPECT_TRUE(train.has("dim-emb"));
  EXPECT_FALSE(translate.yaml()["dim-emb"].IsDefined());
  EXPECT_FALSE(score.yaml()["beam-size"].IsDefined());
  EXPECT_FALSE(train.has("model"));  // no default: required at run time
  // A server warms its decoders up before it listens; lstranslate only when asked; lsscore never.
  EXPECT_TRUE(default_options(App::serve).get_bool("warm-up"));
  EXPECT_FALSE(translate.get_bool("warm-up"));
  EXPECT_FALSE(score.yaml()["warm-up"].IsDefined());
}

TEST(Options, DumpConfigRoundTrips) {
  TempDir dir("dump");
  std::string preset = dir.write("preset.yaml", "dim-emb: 256\ntransformer-heads: 4\nlr-warmup: 4000u\n");
  for (App app : {App::train, App::translate, App::score}) {
    std::vector<std::string> args{"-c", preset, "--dump-config", "-m", "dir with space/model, v1"};
    if (app != App::train) args = {"--dump-config", "-m", "dir with space/model, v1", "--output", "~"};
    if (app == App::train) {
      for (std::string extra : {"--train-sets", "a b.de", "c,d.en", "--learn-rate", "0.00011",
                                "--transformer-preprocess", "n", "--valid-translation-output", "null"})
        args.push_back(extra);
    }
    auto first = run_parse(app, args);
    ASSERT_TRUE(first.parsed.exit_now);
    ASSERT_EQ(first.parsed.exit_code, 0) << first.err;
    ASSERT_FALSE(first.out.empty());
    EXPECT_EQ(first.out.find("config:"), std::string::npos) << "command-line-only options are not dumped";

    std::string dumped = dir.write(std::string("dumped_") + app_name(app) + ".yaml", first.out);
    EXPECT_NO_THROW(load_config_file(app, dumped));
    auto second = run_parse(app, {"-c", dumped, "--dump-config"});
    ASSERT_EQ(second.parsed.exit_code, 0) << second.err;
    EXPECT_EQ(second.out, first.out) << app_name(app);
    // Values that look like YAML null, or contain spaces and commas, come back as they were given.
    EXPECT_EQ(second.parsed.options.get_string("model"), "dir with space/model, v1");
    if (app == App::train) {
      EXPECT_EQ(second.parsed.options.get_strings("train-sets"), (std::vector<std::string>{"a b.de", "c,d.en"}));
      EXPECT_EQ(second.parsed.options.get_string("valid-translation-output"), "null");
      EXPECT_DOUBLE_EQ(second.parsed.options.get_float("learn-rate"), 0.00011);
      EXPECT_EQ(second.parsed.options.get_int("dim-emb"), 256);
    } else {
      EXPECT_EQ(second.parsed.options.get_string("output"), "~");
    }
  }
}

// The benchmarks leave options unset whose default depends on the benchmark (--steps, --precision ...): dumped as
// null, read back as unset, whatever their type.
TEST(Options, DumpConfigRoundTripsUnsetOptions) {
  TempDir dir("dump_bench");
  auto first = run_parse(App::bench, {"--dump-config", "--beams", "2", "--seed", "5"});
  ASSERT_EQ(first.parsed.exit_code, 0) << first.err;
  for (const char* unset : {"steps: ~", "precision: ~", "mini-batch: ~", "model: ~"})
    EXPECT_NE(first.out.find(unset), std::string::npos) << unset;
  auto second = run_parse(App::bench, {"-c", dir.write("bench.yaml", first.out), "--dump-config"});
  ASSERT_EQ(second.parsed.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  EXPECT_FALSE(second.parsed.options.has("steps"));
  EXPECT_FALSE(second.parsed.options.has("precision"));
  EXPECT_EQ(second.parsed.options.get_ints("beams"), (std::vector<int64_t>{2}));
  // An option that has a default for this app still refuses an empty value of the wrong type.
  auto empty_int = run_parse(App::bench, {"-c", dir.write("empty.yaml", "pool:\n")});
  EXPECT_EQ(empty_int.parsed.exit_code, 1);
  EXPECT_NE(empty_int.err.find("option 'pool'"), std::string::npos) << empty_int.err;
}

// An empty value of a string option with a default is the empty string, checked as "" would be: a schedule or a
// choice cannot be empty (the config-file fuzz target found `valid-freq:` accepted, then unreadable).
TEST(Options, AnEmptyStringValueIsCheckedLikeQuotes) {
  TempDir dir("empty_string");
  for (const char* text : {"valid-freq:\n", "valid-freq: ~\n", "mini-batch-words: 10\nvalid-freq\n"}) {
    auto parsed = run_parse(App::train, {"-c", dir.write("c.yaml", text), "-t", "a", "b", "-m", "m"});
    EXPECT_EQ(parsed.parsed.exit_code, 1) << text;
    EXPECT_NE(parsed.err.find("option 'valid-freq' in "), std::string::npos) << parsed.err;
    EXPECT_NE(parsed.err.find("got ''"), std::string::npos) << parsed.err;
  }
  auto empty_ops = run_parse(App::train, {"-c", dir.write("ops.yaml", "transformer-preprocess:\n"), "--dump-config"});
  EXPECT_EQ(empty_ops.parsed.exit_code, 0) << "an empty string is a valid preprocess: " << empty_ops.err;
}

TEST(Options, DumpRoundTripsAwkwardStrings) {
  TempDir dir("awkward");
  for (std::string text : {"--character_coverage=1.0 --model_type=bpe", "a: b", "#x", "x #y", "[x]", "{a}", "'q'",
                           "\"dq\"", " lead", "trail ", "two\nlines", "\xc3\xa9 \xc3\xbc", "*star", "&anchor",
                           "!tag", "%p", "@at", "`bt", "|", ">", "? q", "- d", ",", "~", "null", "", "yes", "1e5"}) {
    SCOPED_TRACE(text);
    auto first = run_parse(App::train, {"--dump-config", "--sentencepiece-options=" + text, "--cache-dir", text});
    ASSERT_EQ(first.parsed.exit_code, 0) << first.err;
    auto second = run_parse(App::train, {"-c", dir.write("dump.yaml", first.out), "--dump-config"});
    ASSERT_EQ(second.parsed.exit_code, 0) << second.err;
    EXPECT_EQ(second.parsed.options.get_string("sentencepiece-options"), text);
    EXPECT_EQ(second.parsed.options.get_string("cache-dir"), text);
    EXPECT_EQ(second.out, first.out);
  }
}

TEST(Options, DumpListsKeysInRegistryOrder) {
  auto run = run_parse(App::train, {"--dump-config", "--learn-rate", "0.1", "--seed", "7"});
  ASSERT_EQ(run.parsed.exit_code, 0) << run.err;
  size_t last = 0;
  size_t found = 0;
  for (const auto& spec : option_registry()) {
    if (!spec.accepted_by(App::train) || spec.command_line_only) continue;
    size_t at = run.out.find("\n" + spec.name + ":");
    if (at == std::string::npos && run.out.rfind(spec.name + ":", 0) == 0) at = 0;
    ASSERT_NE(at, std::string::npos) << spec.name << " missing from the dump";
    EXPECT_GE(at, last) << spec.name << " out of order";
    last = at;
    ++found;
  }
  EXPECT_GT(found, 50u);
}

TEST(Options, HelpAndVersion) {
  auto help = run_parse(App::train, {"--help"});
  EXPECT_TRUE(help.parsed.exit_now);
  EXPECT_EQ(help.parsed.exit_code, 0);
  for (const char* part : {"General options:", "Model options:", "Training options:", "Validation options:",
                           "--dim-emb", "(default: 1234)", "-m, --model"})
    EXPECT_NE(help.out.find(part), std::string::npos) << part;
  EXPECT_EQ(help.out.find("--output-sampling"), std::string::npos);

  // Help wins over anything else on the line, even a mistake.
  auto translate_help = run_parse(App::translate, {"--nonsense", "-h"});
  EXPECT_EQ(translate_help.parsed.exit_code, 0);
  EXPECT_NE(translate_help.out.find("--beam-size"), std::string::npos);
  EXPECT_NE(translate_help.out.find("(default: 0.6)"), std::string::npos);
  EXPECT_EQ(translate_help.out.find("--dim-emb"), std::string::npos);
  auto score_help = run_parse(App::score, {"--help"});
  EXPECT_NE(score_help.out.find("(default: 0)"), std::string::npos);
  auto eval_help = run_parse(App::eval, {"--help"});
  for (const char* part : {"Evaluation options:", "-r, --references", "-m, --metrics", "(default: bleu chrf)"})
    EXPECT_NE(eval_help.out.find(part), std::string::npos) << part;

  auto version = run_parse(App::score, {"--version"});
  EXPECT_TRUE(version.parsed.exit_now);
  EXPECT_EQ(version.parsed.exit_code, 0);
  EXPECT_EQ(version.out, version_string() + "\n");
}

TEST(Options, ModelIsRequiredToRunButNotToDumpOrHelp) {
  for (App app : {App::train, App::translate, App::score}) {
    auto run = run_parse(app, {});
    EXPECT_EQ(run.parsed.exit_code, 1);
    EXPECT_NE(run.err.find("--model"), std::string::npos) << run.err;
    EXPECT_EQ(run_parse(app, {"--dump-config"}).parsed.exit_code, 0);
    EXPECT_FALSE(run_parse(app, {"-m", "somewhere"}).parsed.exit_now);
  }
}

// Every key of every preset loads, and keeps the value the preset file states.
TEST(Options, PresetsLoad) {
  std::vector<std::string> presets;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(LSEQ_SOURCE_DIR) + "/configs"))
    if (entry.path().extension() == ".yaml") presets.push_back(entry.path().string());
  std::sort(presets.begin(), presets.end());
  ASSERT_GE(presets.size(), 3u);
  for (const auto& preset : presets) {
    SCOPED_TRACE(preset);
    ASSERT_NO_THROW(load_config_file(App::train, preset));
    Options options = parse_quietly(App::train, {"-c", preset, "-m", "model"});
    YAML::Node raw = YAML::LoadFile(preset);
    ASSERT_TRUE(raw.IsMap());
    for (const auto& entry : raw) {
      std::string key = entry.first.Scalar();
      const OptionSpec* spec = find_option(key);
      ASSERT_NE(spec, nullptr) << key;
      switch (spec->type) {
        case OptionType::integer: EXPECT_EQ(options.get_int(key), entry.second.as<int64_t>()) << key; break;
        case OptionType::floating: EXPECT_DOUBLE_EQ(options.get_float(key), entry.second.as<double>()) << key; break;
        case OptionType::boolean: EXPECT_EQ(options.get_bool(key), entry.second.as<bool>()) << key; break;
        case OptionType::string: EXPECT_EQ(options.get_string(key), entry.second.as<std::string>()) << key; break;
        case OptionType::ints:
          EXPECT_EQ(options.get_ints(key), entry.second.as<std::vector<int64_t>>()) << key;
          break;
        case OptionType::floats:
          EXPECT_EQ(options.get_floats(key), entry.second.as<std::vector<double>>()) << key;
          break;
        case OptionType::strings:  // a list, or one value (lr-decay-inv-sqrt: 16000u)
          EXPECT_EQ(options.get_strings(key), entry.second.IsScalar()
                                                  ? std::vector<std::string>{entry.second.as<std::string>()}
                                                  : entry.second.as<std::vector<std::string>>())
              << key;
          break;
      }
    }
  }
}

TEST(Options, AccessorsAndSet) {
  Options options = default_options(App::train);
  EXPECT_THROW(options.get_int("model"), Error);        // not set
  EXPECT_THROW(options.get_int("precision"), Error);    // a string read as an integer
  EXPECT_THROW(options.get_bool("dim-emb"), Error);
  options.set("model", YAML::Node("out/model"));
  EXPECT_TRUE(options.has("model"));
  EXPECT_EQ(options.get_string("model"), "out/model");
  options.set("seed", YAML::Node(99));
  EXPECT_EQ(options.get_int("seed"), 99);
  // A key outside the registry (e.g. the model's own bookkeeping) is kept and dumped after the registered ones.
  options.set("zz-extra", YAML::Node("x"));
  std::string dumped = options.dump();
  EXPECT_NE(dumped.find("zz-extra: x"), std::string::npos);
  EXPECT_GT(dumped.find("zz-extra"), dumped.find("early-stopping"));
  Schedule warmup = Options(YAML::Load("{disp-freq: 8000t}")).get_schedule("disp-freq");
  EXPECT_EQ(warmup.count, 8000);
  EXPECT_EQ(warmup.unit, ScheduleUnit::labels);
}

TEST(Options, OptionsFromFileOverlaysTheDefaults) {
  TempDir dir("from_file");
  std::string file = dir.write("model.yaml", "dim-emb: 64\ntransformer-heads: 2\nmodel: stored/dir\n");
  Options options = options_from_file(App::train, file);
  EXPECT_EQ(options.get_int("dim-emb"), 64);
  EXPECT_EQ(options.get_int("transformer-heads"), 2);
  EXPECT_EQ(options.get_string("model"), "stored/dir");
  EXPECT_EQ(options.get_int("enc-depth"), default_options(App::train).get_int("enc-depth"));
  EXPECT_THROW(options_from_file(App::translate, file), Error);  // architecture options are lstrain's
}

TEST(AppMain, CommandLineForTheLogQuotesWhereNeeded) {
  const char* argv[] = {"lstrain", "-m", "my model", "--sentencepiece-options", "it's", "", "-t", "a.de"};
  EXPECT_EQ(format_command_line(8, argv), "lstrain -m 'my model' --sentencepiece-options 'it'\\''s' '' -t a.de");
}

}  // namespace
}  // namespace lseq
