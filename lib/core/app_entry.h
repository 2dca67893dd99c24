#pragma once
// What each app does once its options are parsed and logging is set up. Each returns the process exit code and
// may throw lseq::Error (the main reports it as one "error: ..." line).
#include "core/options.h"

namespace lseq {

int run_train(const Options& options);
int run_translate(const Options& options);
int run_score(const Options& options);

}  // namespace lseq
