#include "core/frequency.h"

#include <cctype>

#include "util/error.h"

namespace lseq {

Frequency Frequency::parse(const std::string& text, const std::string& option) {
  Frequency f;
  std::string digits = text;
  if (!digits.empty() && std::isalpha(static_cast<unsigned char>(digits.back()))) {
    const char unit = digits.back();
    digits.pop_back();
    if (unit == 'u') f.unit = Unit::updates;
    else if (unit == 'e') f.unit = Unit::epochs;
    else if (unit == 't') f.unit = Unit::tokens;
    else fail("option '{}' has value '{}': the unit must be u (updates), e (epochs) or t (target tokens)", option, text);
  }
  if (digits.empty()) fail("option '{}' has value '{}': expected a number such as 500u, 2e or 100000t", option, text);
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      fail("option '{}' has value '{}': expected a number such as 500u, 2e or 100000t", option, text);
    }
  }
  f.amount = std::stoll(digits);
  return f;
}

namespace {
int64_t measure(const Frequency& f, const Progress& p) {
  switch (f.unit) {
    case Frequency::Unit::updates: return p.updates;
    case Frequency::Unit::epochs: return p.epochs_done;
    case Frequency::Unit::tokens: return p.target_tokens;
  }
  return 0;
}
}  // namespace

bool Frequency::crossed(const Progress& before, const Progress& now) const {
  if (!enabled()) return false;
  return measure(*this, now) / amount > measure(*this, before) / amount;
}

bool Frequency::reached(const Progress& now) const { return enabled() && measure(*this, now) >= amount; }

std::string Frequency::str() const {
  const char* suffix = unit == Unit::updates ? "u" : unit == Unit::epochs ? "e" : "t";
  return std::to_string(amount) + suffix;
}

}  // namespace lseq
