#pragma once
// Loads tests/metrics/fixtures (made by scripts/make-metric-fixtures.py from sacreBLEU's own output).
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace lseq_test {

inline std::string metric_fixture_path(const std::string& name) {
  return std::string(LSEQ_SOURCE_DIR) + "/tests/metrics/fixtures/" + name;
}

// The file's lines, split on '\n' only (a file that is empty has no lines; a final '\n' ends the last line).
inline std::vector<std::string> read_fixture_lines(const std::string& name) {
  std::ifstream in(metric_fixture_path(name), std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  std::vector<std::string> lines;
  if (s.empty()) return lines;
  if (s.back() == '\n') s.pop_back();
  std::size_t start = 0;
  while (true) {
    const auto end = s.find('\n', start);
    lines.push_back(s.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return lines;
}

inline const nlohmann::json& expected_metrics() {
  static const nlohmann::json expected = [] {
    std::ifstream in(metric_fixture_path("expected.json"));
    return nlohmann::json::parse(in);
  }();
  return expected;
}

// sacreBLEU's signature with its version replaced by ours.
inline std::string with_our_version(std::string signature, const std::string& ours) {
  const auto at = signature.rfind("version:");
  return signature.substr(0, at) + "version:" + ours;
}

}  // namespace lseq_test
