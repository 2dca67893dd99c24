// --no-spm-encode input: ids are read without overflow, and every kind of bad word is named in the reason.
#include "data/token_ids.h"

#include <gtest/gtest.h>

#include "data/utf8.h"

namespace lseq::data {
namespace {

std::vector<int32_t> ids_of(const std::string& line, int vocab_size = 0) {
  std::vector<int32_t> ids;
  const std::string why = parse_token_ids(line, vocab_size, ids);
  EXPECT_EQ(why, "") << line;
  return ids;
}

std::string why_not(const std::string& line, int vocab_size = 0) {
  std::vector<int32_t> ids;
  return parse_token_ids(line, vocab_size, ids);
}

TEST(TokenIds, NumbersSeparatedBySpacesAndTabs) {
  EXPECT_EQ(ids_of(" 5\t6  0007 \t"), (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(ids_of(""), std::vector<int32_t>{});
  EXPECT_EQ(ids_of("2147483647"), std::vector<int32_t>{2147483647});
  EXPECT_EQ(ids_of("499", 500), std::vector<int32_t>{499});
}

TEST(TokenIds, NumbersTooLargeAreRejectedNotWrapped) {
  // An 11-digit word once parsed as -1 and went on to abort the whole run.
  EXPECT_EQ(why_not("5 12345678901 6", 500), "token id 12345678901 is outside the vocabulary of 500 entries");
  EXPECT_EQ(why_not("12345678901"), "token id 12345678901 is too large for a token id");
  EXPECT_EQ(why_not("2147483648"), "token id 2147483648 is too large for a token id");
  EXPECT_EQ(why_not("4294967295"), "token id 4294967295 is too large for a token id");
  EXPECT_EQ(why_not("18446744073709551617"), "token id 18446744073709551617 is too large for a token id");
  EXPECT_EQ(why_not("500", 500), "token id 500 is outside the vocabulary of 500 entries");
}

TEST(TokenIds, NegativeNumbersAndNonNumbersAreRejected) {
  EXPECT_EQ(why_not("5 -3"), "token id -3 is negative");
  EXPECT_EQ(why_not("-99999999999999999999"), "token id -99999999999999999999 is negative");
  const std::string not_id = " is not a token id (--no-spm-encode expects whitespace-separated numbers)";
  EXPECT_EQ(why_not("5 x"), "'x'" + not_id);
  EXPECT_EQ(why_not("-"), "'-'" + not_id);
  EXPECT_EQ(why_not("+5"), "'+5'" + not_id);
  EXPECT_EQ(why_not("5,6"), "'5,6'" + not_id);
  EXPECT_EQ(why_not("0x1F"), "'0x1F'" + not_id);
  EXPECT_EQ(why_not(std::string("5 \0", 3)), "'\\x00'" + not_id);
  EXPECT_EQ(why_not("5\r"), "'5\\x0D'" + not_id);
}

TEST(TokenIds, ARejectedLineStillReturnsItsReasonForAHugeWord) {
  const std::string word(1 << 20, '7');
  const std::string why = why_not(word + "x", 500);
  EXPECT_LT(why.size(), 200u) << "the message quotes an excerpt, not the megabyte";
  EXPECT_NE(why.find("7777..."), std::string::npos) << why;
}

TEST(Utf8, ExcerptsForMessagesArePrintableAndShort) {
  EXPECT_EQ(excerpt_for_message("Haus"), "Haus");
  EXPECT_EQ(excerpt_for_message("Grüße"), "Grüße");
  EXPECT_EQ(excerpt_for_message(std::string("a\0b\tc\x7f", 6)), "a\\x00b\\x09c\\x7F");
  EXPECT_EQ(excerpt_for_message("x\xff\xc3"), "x\\xFF\\xC3");
  EXPECT_EQ(excerpt_for_message("abcdefghij", 4), "abcd...");
  EXPECT_EQ(excerpt_for_message("üüüü", 3), "üü...") << "a character is not cut in half";
}

}  // namespace
}  // namespace lseq::data
