// The pieces under the options parser: strict value parsers, schedule counts, "did you mean" distances, and
// the registry's own consistency.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <regex>
#include <set>

#include "core/cli/options_registry.h"
#include "core/cli/options_suggest.h"
#include "core/cli/options_values.h"
#include "util/error.h"

namespace lseq {
namespace {

TEST(OptionValues, StrictNumberParsers) {
  int64_t i = 0;
  EXPECT_TRUE(parse_int_text("12", &i));
  EXPECT_EQ(i, 12);
  EXPECT_TRUE(parse_int_text("-4", &i));
  EXPECT_EQ(i, -4);
  EXPECT_TRUE(parse_int_text("+3", &i));
  EXPECT_EQ(i, 3);
  for (const char* bad : {"", "1.5", "1e3", "12a", " 1", "0x10", "99999999999999999999"})
    EXPECT_FALSE(parse_int_text(bad, &i)) << bad;

  double d = 0;
  EXPECT_TRUE(parse_float_text("1e-09", &d));
  EXPECT_DOUBLE_EQ(d, 1e-09);
  EXPECT_TRUE(parse_float_text("-0.5", &d));
  EXPECT_DOUBLE_EQ(d, -0.5);
  EXPECT_TRUE(parse_float_text("+2", &d));
  EXPECT_DOUBLE_EQ(d, 2.0);
  for (const char* bad : {"", "nan", "inf", "0x1p3", "1,5", "1e999", "--1", "one"})
    EXPECT_FALSE(parse_float_text(bad, &d)) << bad;

  bool b = false;
  EXPECT_TRUE(parse_bool_text("yes", &b) && b);
  EXPECT_TRUE(parse_bool_text("False", &b) && !b);
  EXPECT_FALSE(parse_bool_text("maybe", &b));
}

TEST(OptionValues, FloatsPrintShortAndReadBackExactly) {
  std::mt19937_64 rng(20261122);
  std::uniform_real_distribution<double> exponent(-12, 12);
  for (int n = 0; n < 1000; ++n) {
    double value = std::pow(10.0, exponent(rng)) * (n % 2 ? 1 : -1);
    double back = 0;
    ASSERT_TRUE(parse_float_text(format_float(value), &back)) << format_float(value);
    EXPECT_EQ(back, value);
  }
  EXPECT_EQ(format_float(0.0003), "0.0003");  // what a user wrote, not 0.00029999999999999997
}

TEST(OptionValues, ScheduleCounts) {
  Schedule s = parse_schedule("5000u");
  EXPECT_EQ(s.count, 5000);
  EXPECT_EQ(s.unit, ScheduleUnit::updates);
  s = parse_schedule("10e");
  EXPECT_EQ(s.count, 10);
  EXPECT_EQ(s.unit, ScheduleUnit::epochs);
  s = parse_schedule("2Mt");
  EXPECT_EQ(s.count, 2000000);
  EXPECT_EQ(s.unit, ScheduleUnit::labels);
  s = parse_schedule("16000");
  EXPECT_EQ(s.count, 16000);
  EXPECT_EQ(s.unit, ScheduleUnit::updates);
  s = parse_schedule("3K");
  EXPECT_EQ(s.count, 3000);
  EXPECT_EQ(parse_schedule("0").count, 0);
  EXPECT_THROW(parse_schedule("1e", "ut", "option 'lr-warmup'"), Error);
  for (const char* bad : {"", "u", "x", "5u5", "1.5u", "-3u", "99999999999999999999u", "9999999999999G"})
    EXPECT_THROW(parse_schedule(bad), Error) << bad;
  try {
    parse_schedule("10x", "ut", "option 'disp-freq' in a.yaml line 4");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("option 'disp-freq' in a.yaml line 4"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("'10x'"), std::string::npos);
  }
}

// The textbook recursive definition, as the reference for the one-row implementation.
size_t reference_distance(const std::string& a, const std::string& b) {
  std::function<size_t(size_t, size_t)> d = [&](size_t i, size_t j) -> size_t {
    if (i == 0) return j;
    if (j == 0) return i;
    return std::min({d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] == b[j - 1] ? 0 : 1)});
  };
  return d(a.size(), b.size());
}

TEST(OptionSuggest, EditDistanceMatchesTheDefinition) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> length(0, 6), letter(0, 3);
  for (int n = 0; n < 300; ++n) {
    std::string a, b;
    for (int k = length(rng); k > 0; --k) a += static_cast<char>('a' + letter(rng));
    for (int k = length(rng); k > 0; --k) b += static_cast<char>('a' + letter(rng));
    EXPECT_EQ(edit_distance(a, b), reference_distance(a, b)) << a << " / " << b;
  }
}

TEST(OptionSuggest, NearestName) {
  std::vector<std::string> names{"dim-emb", "dim-vocabs", "transformer-heads", "enc-depth", "dec-depth"};
  EXPECT_EQ(nearest_name("dim-embb", names), "dim-emb");
  EXPECT_EQ(nearest_name("enc-dept", names), "enc-depth");
  EXPECT_EQ(nearest_name("heads", names), "transformer-heads");
  EXPECT_EQ(nearest_name("learn-rate", names), "");
}

constexpr App kEveryApp[] = {App::train, App::translate, App::score, App::eval, App::bench};

TEST(OptionRegistry, IsConsistent) {
  std::set<std::string> names;
  std::set<std::pair<App, char>> flags;  // a letter names one option per program
  std::regex name_form("[a-z][a-z0-9-]*");
  for (const auto& spec : option_registry()) {
    SCOPED_TRACE(spec.name);
    EXPECT_TRUE(std::regex_match(spec.name, name_form));
    EXPECT_TRUE(names.insert(spec.name).second) << "declared twice";
    for (App app : kEveryApp) {
      if (spec.short_flag && spec.accepted_by(app)) {
        EXPECT_TRUE(flags.insert({app, spec.short_flag}).second) << "short flag used twice by " << app_name(app);
      }
    }
    EXPECT_FALSE(spec.help.empty());
    EXPECT_NE(spec.apps, 0u);
    EXPECT_EQ(find_option(spec.name), &spec);
    // Every default, for every app, passes the option's own checks.
    for (App app : kEveryApp) {
      DefaultTokens tokens = spec.default_for(app);
      if (spec.accepted_by(app) && tokens) {
        EXPECT_NO_THROW(value_from_words(spec, *tokens, ValueSource{"registry", 0}));
      }
    }
  }
  for (const char* marian : {"train-sets", "vocabs", "dim-emb", "enc-depth", "transformer-heads", "learn-rate",
                             "lr-warmup", "lr-decay-inv-sqrt", "label-smoothing", "mini-batch-words", "maxi-batch",
                             "valid-freq", "valid-metrics", "beam-size", "normalize", "n-best", "devices",
                             "precision", "after"})
    EXPECT_NE(find_option(marian), nullptr) << marian;
  EXPECT_EQ(find_short_option(App::translate, 'm')->name, "model");
  EXPECT_EQ(find_short_option(App::eval, 'm')->name, "metrics");
  EXPECT_EQ(find_short_option(App::eval, 'b'), nullptr);
}

}  // namespace
}  // namespace lseq
