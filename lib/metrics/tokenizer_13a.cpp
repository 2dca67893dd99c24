#include "metrics/tokenizer_13a.h"

namespace lseq::metrics {
namespace {

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  std::string out;
  std::size_t start = 0;
  for (std::size_t hit; (hit = text.find(from, start)) != std::string::npos; start = hit + from.size()) {
    out.append(text, start, hit - start);
    out.append(to);
  }
  if (start == 0) return;
  out.append(text, start, std::string::npos);
  text.swap(out);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_period_or_comma(char c) { return c == '.' || c == ','; }

// The first 13a regex's class [\{-\~\[-\` -\&\(-\+\:-\@\/]: ASCII symbols that become separate tokens. Not '-',
// '.', ',', '\'' (those are handled by the later rules or stay attached).
bool is_split_symbol(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return (u >= '{' && u <= '~') || (u >= '[' && u <= '`') || (u >= ' ' && u <= '&') || (u >= '(' && u <= '+') ||
         (u >= ':' && u <= '@') || u == '/';
}

// re.sub of a two-character pattern "(A)(B)" -> rewrite: matches are found left to right and do not overlap, so
// after a match the scan resumes behind its second character. Working on bytes gives the same result as on code
// points because both classes involved are ASCII or "anything but a digit", and UTF-8 continuation bytes are never
// ASCII.
template <typename First, typename Second, typename Rewrite>
std::string substitute_pairs(const std::string& text, First first, Second second, Rewrite rewrite) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  std::size_t i = 0;
  while (i < text.size()) {
    if (i + 1 < text.size() && first(text[i]) && second(text[i + 1])) {
      rewrite(out, text[i], text[i + 1]);
      i += 2;
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::string_view rstrip_python(std::string_view text) {
  // Find the end of the last non-whitespace character.
  std::size_t end = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    char32_t c;
    const std::size_t len = decode_utf8_char(text, pos, c);
    pos += len;
    if (!is_python_whitespace(c)) end = pos;
  }
  return text.substr(0, end);
}

}  // namespace

bool is_python_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::size_t decode_utf8_char(std::string_view text, std::size_t pos, char32_t& code_point) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = byte(pos);
  code_point = b0;
  if (b0 < 0x80) return 1;
  code_point = 0xFFFD;  // until proven valid: an invalid byte stands for itself, never for whitespace
  std::size_t len;
  char32_t value;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    value = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    value = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    value = b0 & 0x07;
  } else {
    return 1;
  }
  if (pos + len > text.size()) return 1;
  for (std::size_t k = 1; k < len; ++k) {
    const unsigned char b = byte(pos + k);
    if ((b & 0xC0) != 0x80) return 1;
    value = (value << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values beyond U+10FFFF are not characters.
  if ((len == 3 && value < 0x800) || (len == 4 && (value < 0x10000 || value > 0x10FFFF)) ||
      (value >= 0xD800 && value <= 0xDFFF))
    return 1;
  code_point = value;  // valid
  return len;
}

std::vector<std::string_view> split_python_whitespace(std::string_view text) {
  std::vector<std::string_view> words;
  std::size_t word_start = std::string_view::npos;
  for (std::size_t pos = 0; pos < text.size();) {
    char32_t c;
    const std::size_t len = decode_utf8_char(text, pos, c);
    if (is_python_whitespace(c)) {
      if (word_start != std::string_view::npos) words.push_back(text.substr(word_start, pos - word_start));
      word_start = std::string_view::npos;
    } else if (word_start == std::string_view::npos) {
      word_start = pos;
    }
    pos += len;
  }
  if (word_start != std::string_view::npos) words.push_back(text.substr(word_start));
  return words;
}

std::string tokenize_13a(std::string_view line) {
  std::string text(rstrip_python(line));
  // Language-independent part of mteval-v13a.
  replace_all(text, "<skipped>", "");
  replace_all(text, "-\n", "");
  replace_all(text, "\n", " ");
  if (text.find('&') != std::string::npos) {
    replace_all(text, "&quot;", "\"");
    replace_all(text, "&amp;", "&");
    replace_all(text, "&lt;", "<");
    replace_all(text, "&gt;", ">");
  }
  text = " " + text + " ";

  // Symbols become tokens of their own.
  std::string spaced;
  spaced.reserve(text.size() * 2);
  for (const char c : text) {
    if (is_split_symbol(c)) {
      spaced += ' ';
      spaced += c;
      spaced += ' ';
    } else {
      spaced += c;
    }
  }
  const auto not_digit = [](char c) { return !is_digit(c); };
  // Period and comma are split off unless preceded by a digit ...
  spaced = substitute_pairs(spaced, not_digit, is_period_or_comma, [](std::string& out, char a, char b) {
    out += a;
    out += ' ';
    out += b;
    out += ' ';
  });
  // ... and unless followed by a digit (so "1.5" and "1,000" stay whole).
  spaced = substitute_pairs(spaced, is_period_or_comma, not_digit, [](std::string& out, char a, char b) {
    out += ' ';
    out += a;
    out += ' ';
    out += b;
  });
  // A dash after a digit is split off ("3-4" -> "3 - 4").
  spaced = substitute_pairs(spaced, is_digit, [](char c) { return c == '-'; }, [](std::string& out, char a, char b) {
    out += a;
    out += ' ';
    out += b;
    out += ' ';
  });

  std::string tokens;
  for (const auto word : split_python_whitespace(spaced)) {
    if (!tokens.empty()) tokens += ' ';
    tokens.append(word);
  }
  return tokens;
}

}  // namespace lseq::metrics
