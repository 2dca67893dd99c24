#pragma once
// The body shared by the programs' mains (lstrain, lstranslate, lsscore, lseval, the benchmarks): parse the options,
// set up logging, log the version and command line, run the app, and turn any exception into one "error: ..." line
// on stderr with exit code 1.
#include "core/cli/options.h"

namespace lseq {

using AppEntry = int (*)(const Options&);

int app_main(App app, int argc, const char* const* argv, AppEntry entry);

// The command line as one string for the log, quoting words that contain spaces or quotes.
std::string format_command_line(int argc, const char* const* argv);

}  // namespace lseq
