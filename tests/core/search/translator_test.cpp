// lstranslate's input handling: bad lines, cropping, batching windows, and output order / line count.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <sstream>

#include "captured_log.h"
#include "core/search/nbest_format.h"
#include "core/search/translator.h"
#include "data/ordered_output.h"
#include "data/translation_input.h"
#include "toy_step_model.h"
#include "util/error.h"

namespace lseq {
namespace {

using data::TranslationInput;
using data::TranslationInputOptions;
using testing::CapturedLog;

// A stand-in for SentencePiece: one id per byte-separated word, ids 4 + (word length).
std::vector<int32_t> toy_encode(std::string_view text) {
  std::vector<int32_t> ids;
  std::istringstream words{std::string(text)};
  std::string w;
  while (words >> w) ids.push_back(4 + static_cast<int32_t>(w.size()));
  return ids;
}

std::vector<data::InputWindow> read_all(const std::string& text, TranslationInputOptions o,
                                        data::TextEncoder encoder = toy_encode) {
  std::istringstream in(text);
  data::InputLineReader reader(in, "input.txt");
  TranslationInput input(reader, encoder, o);
  std::vector<data::InputWindow> windows;
  data::InputWindow w;
  while (input.next(w)) windows.push_back(w);
  return windows;
}

TEST(TranslationInput, EmptyAndInvalidLinesYieldEmptyOutputsWithAWarning) {
  CapturedLog log;
  std::string text = "a bb\n\nccc \xff\xfe d\nee\n";
  auto windows = read_all(text, {});
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].empty_lines, (std::vector<int64_t>{1, 2}));
  int64_t decoded = 0;
  for (const auto& b : windows[0].batches) decoded += b.size;
  EXPECT_EQ(decoded, 2);
  EXPECT_NE(log.text().find("input.txt line 3: invalid UTF-8"), std::string::npos) << log.text();
  EXPECT_EQ(log.text().find("line 2"), std::string::npos) << "an empty line is not worth a warning";
}

TEST(TranslationInput, OverlongLineIsCroppedWithAWarningNotDropped) {
  CapturedLog log;
  TranslationInputOptions o;
  o.max_length = 3;
  auto windows = read_all("a b c d e f\nx\n", o);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_TRUE(windows[0].empty_lines.empty());
  const data::Batch& b = windows[0].batches.at(0);
  ASSERT_EQ(b.size, 2);
  EXPECT_EQ(b.line_ids[0], 0);
  EXPECT_EQ(b.src_lengths[0], 4) << "3 tokens + eos";
  EXPECT_NE(log.text().find("input.txt line 1: 6 tokens, cropped to --max-length 3"), std::string::npos) << log.text();
}

TEST(TranslationInput, IdsInputIsCheckedAgainstTheVocabulary) {
  CapturedLog log;
  TranslationInputOptions o;
  o.vocab_size = 50;
  auto windows = read_all("5 6 7\n5 x 7\n5 60\n 9\t10 \n", o, nullptr);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].empty_lines, (std::vector<int64_t>{1, 2}));
  EXPECT_NE(log.text().find("input.txt line 2: 'x' is not a token id"), std::string::npos) << log.text();
  EXPECT_NE(log.text().find("input.txt line 3: token id 60 is outside the vocabulary of 50"), std::string::npos);
  bool found = false;
  for (const auto& b : windows[0].batches)
    for (int i = 0; i < b.size; ++i)
      if (b.line_ids[i] == 3) {
        found = true;
        EXPECT_EQ(b.src[i * b.src_len], 9);
        EXPECT_EQ(b.src[i * b.src_len + 1], 10);
        EXPECT_EQ(b.src[i * b.src_len + 2], 3);
      }
  EXPECT_TRUE(found);
}

TEST(TranslationInput, IdsThatOverflowOrAreNegativeRejectOnlyTheirLine) {
  // An 11-digit id used to be read as -1 and abort the run; each bad line now gets an empty output and a warning.
  CapturedLog log;
  TranslationInputOptions o;
  o.vocab_size = 50;
  auto windows = read_all("5 6\n12345678901\n-3\n7 99999999999999999999999\n8\n", o, nullptr);
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].empty_lines, (std::vector<int64_t>{1, 2, 3}));
  std::vector<int64_t> decoded;
  for (const auto& b : windows[0].batches) decoded.insert(decoded.end(), b.line_ids.begin(), b.line_ids.end());
  std::sort(decoded.begin(), decoded.end());
  EXPECT_EQ(decoded, (std::vector<int64_t>{0, 4}));
  for (const char* warning : {"input.txt line 2: token id 12345678901 is outside the vocabulary of 50 entries; "
                              "writing an empty output line for it",
                              "input.txt line 3: token id -3 is negative",
                              "input.txt line 4: token id 99999999999999999999999 is outside"})
    EXPECT_NE(log.text().find(warning), std::string::npos) << warning << "\n" << log.text();
}

TEST(TranslationInput, WindowsAreSortedBatchesWithinTheLimits) {
  std::mt19937 rng(5);
  std::string text;
  const int lines = 230;
  for (int i = 0; i < lines; ++i) {
    int words = 1 + static_cast<int>(rng() % 20);
    for (int k = 0; k < words; ++k) text += std::string(1 + rng() % 3, 'w') + " ";
    text += "\n";
  }
  TranslationInputOptions o;
  o.mini_batch = 8;
  o.mini_batch_words = 60;
  o.maxi_batch = 5;
  auto windows = read_all(text, o);
  ASSERT_EQ(windows.size(), 6u);  // 40 lines per window
  std::vector<int> seen(lines, 0);
  for (const auto& w : windows) {
    int previous_longest = 1 << 30;
    for (const auto& b : w.batches) {
      EXPECT_LE(b.size, 8);
      EXPECT_TRUE(b.size == 1 || b.size * b.src_len <= 60) << b.size << " x " << b.src_len;
      EXPECT_LE(b.src_len, previous_longest) << "longest first within a window";
      previous_longest = b.src_len;
      for (int i = 0; i < b.size; ++i) {
        ASSERT_GE(b.line_ids[i], w.first_line);
        ASSERT_LT(b.line_ids[i], w.end_line);
        seen[b.line_ids[i]]++;
      }
    }
  }
  for (int i = 0; i < lines; ++i) EXPECT_EQ(seen[i], 1) << "line " << i;

  // A smaller first window (continuous decoding starts once it is read), then the full ones, every line once.
  o.first_maxi_batch = 2;
  windows = read_all(text, o);
  ASSERT_EQ(windows.size(), 7u);  // 16 lines, then 40 at a time
  EXPECT_EQ(windows[0].end_line - windows[0].first_line, 16);
  EXPECT_EQ(windows[1].first_line, windows[0].end_line);
  EXPECT_EQ(windows[1].end_line - windows[1].first_line, 40);
  EXPECT_EQ(windows.back().end_line, lines);
}

TEST(TranslationInput, BothBatchLimitsZeroIsAnError) {
  std::istringstream in("a\n");
  data::InputLineReader reader(in, "x");
  TranslationInputOptions o;
  o.mini_batch = 0;
  o.mini_batch_words = 0;
  EXPECT_THROW(TranslationInput(reader, toy_encode, o), Error);
}

TEST(TranslationInput, MissingInputFileNamesIt) {
  data::InputLineReader reader(std::vector<std::string>{"/nonexistent/in.txt"});
  std::string line;
  try {
    reader.next(line);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/in.txt"), std::string::npos);
  }
}

TEST(OrderedOutput, WritesInInputOrderAndReportsMissingLines) {
  std::ostringstream out;
  data::OrderedOutput o(out);
  o.put(2, "c");
  o.put(0, "a");
  EXPECT_EQ(out.str(), "a\n");
  o.put(1, "b");
  EXPECT_EQ(out.str(), "a\nb\nc\n");
  EXPECT_THROW(o.put(1, "again"), Error);
  o.put(4, "e");
  EXPECT_THROW(o.finish(5), Error);
}

// The whole translate loop with the toy model: the output has one line per input line, in input order, whatever
// the sorting, and each line equals what that line gives translated on its own.
TEST(Translator, OutputOrderAndLineCountMatchTheInput) {
  CapturedLog log;
  std::mt19937 rng(9);
  std::vector<std::string> input_lines;
  for (int i = 0; i < 57; ++i) {
    std::string line;
    int words = static_cast<int>(rng() % 9);  // some empty lines
    for (int k = 0; k < words; ++k) line += std::to_string(4 + rng() % 40) + " ";
    if (i == 13) line = "4 \xc3\x28 5";  // invalid UTF-8
    input_lines.push_back(line);
  }
  std::string text;
  for (const auto& l : input_lines) text += l + "\n";
  TranslateSettings settings;
  settings.beam.beam_size = 3;
  TranslationInputOptions o;
  o.mini_batch = 4;
  o.maxi_batch = 3;
  o.vocab_size = 44;

  std::istringstream in(text);
  data::InputLineReader reader(in, "in");
  TranslationInput input(reader, nullptr, o);
  testing::ToyStepModel model(44, 3, -0.5);
  std::ostringstream out;
  EXPECT_EQ(translate_all(model, input, nullptr, settings, out).lines, 57);

  std::vector<std::string> output_lines;
  std::istringstream got(out.str());
  for (std::string l; std::getline(got, l);) output_lines.push_back(l);
  ASSERT_EQ(output_lines.size(), input_lines.size());
  for (size_t i = 0; i < input_lines.size(); ++i) {
    std::istringstream one(input_lines[i] + "\n");
    data::InputLineReader r(one, "one");
    TranslationInput single(r, nullptr, o);
    testing::ToyStepModel d(44, 3, -0.5);
    std::ostringstream expected;
    translate_all(d, single, nullptr, settings, expected);
    EXPECT_EQ(output_lines[i] + "\n", expected.str()) << "line " << i;
    const bool blank = input_lines[i].find_first_not_of(' ') == std::string::npos || i == 13;
    if (blank) {
      EXPECT_EQ(output_lines[i], "");
    } else {
      EXPECT_NE(output_lines[i], "");
    }
  }
}

TEST(Translator, NBestOutputHasBeamSizeEntriesPerLine) {
  TranslateSettings settings;
  settings.beam.beam_size = 4;
  settings.n_best = true;
  settings.word_scores = true;
  std::istringstream in("5 6 7\n\n8 9\n");
  data::InputLineReader reader(in, "in");
  TranslationInput input(reader, nullptr, {});
  testing::ToyStepModel model(30, 4);
  std::ostringstream out;
  translate_all(model, input, [](const std::vector<int32_t>& ids) { return "<" + ids_to_text(ids) + ">"; },
                settings, out);
  std::vector<int> per_line(3, 0);
  std::istringstream got(out.str());
  for (std::string l; std::getline(got, l);) {
    NBestEntry e;
    ASSERT_EQ(parse_nbest_entry(l, e), "") << l;
    ASSERT_LT(e.line, 3);
    per_line[e.line]++;
    EXPECT_NE(l.find(" ||| WordScores= "), std::string::npos);
    EXPECT_NE(l.find(" ||| F0= "), std::string::npos);
  }
  EXPECT_EQ(per_line, (std::vector<int>{4, 1, 4}));
  EXPECT_EQ(out.str().find("1 |||  ||| WordScores= ||| F0= 0 ||| 0\n") != std::string::npos, true) << out.str();
}

// A detokenizer may give line breaks (a byte-level BPE decodes its newline token to '\n'): each becomes a space,
// so that every input line keeps one output line, and the totals count the outputs that had any.
TEST(Translator, LineBreaksInADetokenizedOutputBecomeSpaces) {
  for (const bool n_best : {false, true}) {
    TranslateSettings settings;
    settings.beam.beam_size = 2;
    settings.n_best = n_best;
    std::istringstream in("5 6 7\n\n8 9\n");
    data::InputLineReader reader(in, "in");
    TranslationInput input(reader, nullptr, {});
    testing::ToyStepModel model(30, 2);
    std::ostringstream out;
    const TranslationTotals totals = translate_all(
        model, input, [](const std::vector<int32_t>& ids) { return "a\nb\r\n" + ids_to_text(ids); }, settings,
        out);
    std::vector<std::string> lines;
    std::istringstream got(out.str());
    for (std::string l; std::getline(got, l);) lines.push_back(l);
    // Best: three lines; n-best: two entries for each translated line, one for the empty line.
    ASSERT_EQ(lines.size(), n_best ? 5u : 3u) << out.str();
    EXPECT_EQ(lines[0].rfind(n_best ? "0 ||| a b  " : "a b  ", 0), 0u) << lines[0];
    EXPECT_EQ(totals.line_breaks_replaced, n_best ? 4 : 2) << "the empty line's output held none";
  }
}

TEST(NBestFormat, MarianLayout) {
  Hypothesis h;
  h.tokens = {7, 8};
  h.word_log_probs = {-0.5f, -1.25f, -0.125f};
  h.log_prob = -1.875;
  h.score = -0.625;
  EXPECT_EQ(format_nbest_entry(3, "ab c", h, false), "3 ||| ab c ||| F0= -1.875 ||| -0.625");
  EXPECT_EQ(format_nbest_entry(3, "ab c", h, true),
            "3 ||| ab c ||| WordScores= -0.50000 -1.25000 -0.12500 ||| F0= -1.875 ||| -0.625");
  EXPECT_EQ(format_best("ab c", h, false), "ab c");
  EXPECT_EQ(format_best("ab c", h, true), "ab c ||| WordScores= -0.50000 -1.25000 -0.12500");
  EXPECT_EQ(format_score(-12.3456789), "-12.3457");
}

TEST(NBestFormat, RescoringAppendsAFeatureToTheFeatureField) {
  EXPECT_EQ(add_nbest_feature("3 ||| ab c ||| F0= -1.875 ||| -0.625", "Score", -2.5),
            "3 ||| ab c ||| F0= -1.875 Score= -2.5 ||| -0.625");
  EXPECT_EQ(add_nbest_feature("3 ||| ab ||| WordScores= -1.00000 ||| F0= -1 ||| -1", "LM", -3),
            "3 ||| ab ||| WordScores= -1.00000 ||| F0= -1 LM= -3 ||| -1");
  EXPECT_EQ(add_nbest_feature("3 ||| only", "LM", -3), "3 ||| only") << "no feature field: as it was";
  EXPECT_FALSE(has_feature_field("3 ||| only"));
  NBestEntry e;
  EXPECT_EQ(parse_nbest_entry("12 |||  hello world  ||| F0= -1 ||| -1", e), "");
  EXPECT_EQ(e.line, 12);
  EXPECT_EQ(e.text, "hello world");
}

TEST(NBestFormat, MalformedEntriesSayWhy) {
  const std::pair<std::string, std::string> cases[] = {
      {"hello", "not an n-best entry"},
      {"", "not an n-best entry"},
      {"3 ||| only", "not an n-best entry"},
      {"x ||| a ||| F0= 1", "'x' is not a line number"},
      {"-1 ||| a ||| F0= 1", "'-1' is not a line number"},
      {"1e3 ||| a ||| F0= 1", "'1e3' is not a line number"},
      {" ||| a ||| F0= 1", "'' is not a line number"},
      {"99999999999999999999 ||| a ||| F0= 1", "'99999999999999999999' is not a line number"},
      {std::string("4") + '\0' + " ||| a ||| F0= 1", "'4\\x00' is not a line number"},
  };
  for (const auto& [entry, why] : cases) {
    NBestEntry e;
    e.line = -7;
    const std::string problem = parse_nbest_entry(entry, e);
    EXPECT_NE(problem.find(why), std::string::npos) << entry << " -> " << problem;
    EXPECT_EQ(e.line, -7) << "left as it was";
  }
}

}  // namespace
}  // namespace lseq
