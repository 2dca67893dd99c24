#pragma once
// The one exception type lseq throws for bad input or a failed operation. Its message is a complete, single-line
// sentence for the user (it names the file, line or option and says what to do); apps print it and exit non-zero.
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace lseq {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace lseq
