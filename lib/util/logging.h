#pragma once
// Logging set-up shared by the apps: one format, the terminal (stderr) and optionally a file, a quiet mode.
// Libraries just call spdlog::info/warn/...; this configures where it goes.
#include <string>

namespace lseq {

struct LogOptions {
  std::string file;    // also append to this file when not empty
  bool quiet = false;  // terminal shows warnings and errors only (the file still gets everything)
  std::string level = "info";  // spdlog's names: trace, debug, info, warn, err, critical, off (--log-level)
};

void setup_logging(const LogOptions& options);

}  // namespace lseq
