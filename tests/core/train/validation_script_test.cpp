// Marian's validation scripts and output names: --valid-script-path's score is the last number it prints, a failing
// or silent script is one error naming the option, and --valid-translation-output's {E} {B} {U} {T} templates.
#include <gtest/gtest.h>

#include <string>

#include "core/train/validator.h"
#include "util/error.h"

namespace lseq {
namespace {

std::string error_of(const std::string& command) {
  try {
    run_validation_script(command, "--valid-script-path");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ValidationScript, TheScoreIsTheLastNumberPrinted) {
  EXPECT_DOUBLE_EQ(run_validation_script("echo 21.5", "--valid-script-path"), 21.5);
  EXPECT_DOUBLE_EQ(run_validation_script("echo 'BLEU = 3'; echo 'final: 7.25 (words 40/60)'", "x"), 7.25);
}

TEST(ValidationScript, AFailingOrSilentScriptIsAnErrorNamingTheOption) {
  const std::string failed = error_of("echo 12; exit 3");
  EXPECT_NE(failed.find("--valid-script-path"), std::string::npos) << failed;
  EXPECT_NE(failed.find("exit status 3"), std::string::npos) << failed;
  const std::string silent = error_of("echo no score here");
  EXPECT_NE(silent.find("printed no number"), std::string::npos) << silent;
}

TEST(ValidationOutput, MariansTemplatesAreReplacedAndOthersKept) {
  ValidationPoint point;
  point.epoch = 2;
  point.batch = 30;
  point.updates = 400;
  point.labels = 5000;
  EXPECT_EQ(expand_output_template("valid-{E}-{B}-{U}-{T}.de", point), "valid-2-30-400-5000.de");
  EXPECT_EQ(expand_output_template("v{X}{U}{", point), "v{X}400{");
  EXPECT_EQ(expand_output_template("plain.txt", point), "plain.txt");
}

}  // namespace
}  // namespace lseq
