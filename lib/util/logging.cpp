#include "util/logging.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <vector>

#include "util/error.h"

namespace lseq {

void setup_logging(const LogOptions& options) {
  const spdlog::level::level_enum level = spdlog::level::from_str(options.level);
  // from_str answers off for a name it does not know: only "off" itself may mean that.
  if (level == spdlog::level::off && options.level != "off")
    fail("--log-level '{}' is not a level: use trace, debug, info, warn, err, critical or off", options.level);
  std::vector<spdlog::sink_ptr> sinks;
  auto terminal = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  terminal->set_level(options.quiet ? std::max(level, spdlog::level::warn) : level);
  sinks.push_back(terminal);
  if (!options.file.empty()) {
    // spdlog would create missing directories silently; a typo in the path must not leave a new tree behind.
    const std::filesystem::path parent = std::filesystem::path(options.file).parent_path();
    std::error_code ec;
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
      fail("cannot write log file '{}' (--log): the directory '{}' does not exist", options.file, parent.string());
    try {
      auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.file);
      file->set_level(level);
      sinks.push_back(file);
    } catch (const spdlog::spdlog_ex& e) {
      fail("cannot open log file '{}' (--log): {}", options.file, e.what());
    }
  }
  auto logger = std::make_shared<spdlog::logger>("lseq", sinks.begin(), sinks.end());
  logger->set_pattern("[%Y-%m-%d %H:%M:%S] [%^%l%$] %v");
  logger->set_level(level);
  logger->flush_on(std::max(level, spdlog::level::info));
  spdlog::set_default_logger(logger);
}

}  // namespace lseq
