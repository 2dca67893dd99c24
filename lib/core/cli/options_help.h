#pragma once
// --help: the options an app accepts, grouped, with their defaults.
#include <iosfwd>

#include "core/cli/options.h"

namespace lseq {

void print_help(App app, std::ostream& out);

}  // namespace lseq
