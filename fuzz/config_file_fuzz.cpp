// YAML config files (--config, a model directory's config.yml and decoder.yml): load_config_file, through
// options_from_file, for one of the programs. The input is the file. A file it accepts must give values that the
// typed accessors read, and a --dump-config that loads back to the same dump (options_checks.h).
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/cli/options.h"
#include "fuzz_support.h"
#include "options_checks.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lseq::fuzz::quiet_logging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using lseq::App;
  // One program per input (a hash of its bytes picks it): reading a file for all five would cost five times more.
  uint32_t hash = 2166136261u;
  for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 16777619u;
  const App apps[] = {App::train, App::translate, App::score, App::eval, App::bench};
  const App app = apps[hash % 5];
  const std::string path = lseq::fuzz::scratch_file("config.yml");
  lseq::fuzz::write_bytes(path, {reinterpret_cast<const char*>(data), size});
  lseq::Options options;
  if (lseq::fuzz::guarded([&] { options = lseq::options_from_file(app, path); }))
    lseq::fuzz::check_accepted_options(options, app, "config file");
  return 0;
}
