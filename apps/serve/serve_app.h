#pragma once
// lsserve's body, run by main() once the options are parsed and logging is set up (core/cli/app_main.h).
#include "core/cli/options.h"

namespace lseq {

int run_serve(const Options& options);

}  // namespace lseq
