#pragma once
// Promises of accepted options, shared by the config-file and command-line targets: every set option reads back
// with the accessor of its registry type, and --dump-config loads back as a config file to the same dump.
#include <string>

#include "core/cli/options.h"
#include "core/cli/options_registry.h"
#include "fuzz_support.h"

namespace lseq::fuzz {

inline void read_every_option(const Options& options, App app) {
  for (const auto& spec : option_registry()) {
    if (!spec.accepted_by(app) || !options.has(spec.name)) continue;
    switch (spec.type) {
      case OptionType::boolean: options.get_bool(spec.name); break;
      case OptionType::integer: options.get_int(spec.name); break;
      case OptionType::floating: options.get_float(spec.name); break;
      case OptionType::string:
        options.get_string(spec.name);
        if (!spec.schedule_units.empty()) options.get_schedule(spec.name);
        break;
      case OptionType::strings: options.get_strings(spec.name); break;
      case OptionType::ints: options.get_ints(spec.name); break;
      case OptionType::floats: options.get_floats(spec.name); break;
    }
  }
}

// `origin` says where the options came from ("config file", "command line") in a finding.
inline void check_accepted_options(const Options& options, App app, const std::string& origin) {
  try {
    read_every_option(options, app);
  } catch (const Error& e) {
    LSEQ_FUZZ_EXPECT(false, "an accepted " + origin + " gave an unreadable value: " + e.what());
  }
  const std::string dump = options.dump();
  const std::string path = scratch_file("dump.yml");
  write_bytes(path, dump);
  std::string dump_again;
  try {
    dump_again = options_from_file(app, path).dump();
  } catch (const Error& e) {
    LSEQ_FUZZ_EXPECT(false, "--dump-config of an accepted " + origin + " does not load: " + e.what());
  }
  LSEQ_FUZZ_EXPECT(dump_again == dump, "--dump-config of an accepted " + origin + " loads back to another dump:\n" +
                                           dump + "---\n" + dump_again);
}

}  // namespace lseq::fuzz
