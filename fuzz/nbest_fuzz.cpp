// n-best lists as lsscore --n-best reads them: parse_nbest_entry and add_nbest_feature on each line of the input.
// Promises checked: an entry that parses has a line number >= 0, takes a feature that then appears in the line,
// and keeps its line number and text when it does.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "core/search/nbest_format.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lseq::fuzz::quiet_logging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream lines(std::string(reinterpret_cast<const char*>(data), size));
  for (std::string line; std::getline(lines, line);) {
    lseq::NBestEntry entry;
    const bool parsed = lseq::fuzz::guarded([&] { entry = lseq::parse_nbest_entry(line, "nbest line 1"); });
    std::string rescored;
    const bool added = lseq::fuzz::guarded([&] { rescored = lseq::add_nbest_feature(line, "R", -1.5, "line 1"); });
    if (!parsed) continue;
    LSEQ_FUZZ_EXPECT(entry.line >= 0, "a negative line number was accepted");
    LSEQ_FUZZ_EXPECT(added, "an entry that parses cannot take a feature");
    LSEQ_FUZZ_EXPECT(rescored.find(" R= -1.5 ") != std::string::npos, "the added feature is missing: " + rescored);
    lseq::NBestEntry again;
    try {
      again = lseq::parse_nbest_entry(rescored, "rescored line");
    } catch (const lseq::Error& e) {
      LSEQ_FUZZ_EXPECT(false, std::string("a rescored entry does not parse: ") + e.what());
    }
    LSEQ_FUZZ_EXPECT(again.line == entry.line && again.text == entry.text,
                     "adding a feature changed the entry's line or text: " + rescored);
  }
  return 0;
}
