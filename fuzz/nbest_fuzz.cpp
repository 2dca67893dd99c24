// n-best lists as lsscore --n-best reads them: parse_nbest_entry and add_nbest_feature on each line of the input.
// Promises checked: nothing throws; an entry that parses has a line number >= 0 and a feature field, takes a feature
// that then appears in the line, and keeps its line number and text when it does; an entry that does not parse says
// why.
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
    std::string why;
    std::string rescored;
    bool has_field = false;
    LSEQ_FUZZ_EXPECT(lseq::fuzz::guarded([&] {
                       why = lseq::parse_nbest_entry(line, entry);
                       has_field = lseq::has_feature_field(line);
                       rescored = lseq::add_nbest_feature(line, "R", -1.5);
                     }),
                     "reading an n-best entry threw");
    if (!why.empty()) continue;
    LSEQ_FUZZ_EXPECT(entry.line >= 0, "a negative line number was accepted");
    LSEQ_FUZZ_EXPECT(has_field, "an entry that parses has no feature field");
    LSEQ_FUZZ_EXPECT(rescored.find(" R= -1.5 ") != std::string::npos, "the added feature is missing: " + rescored);
    lseq::NBestEntry again;
    LSEQ_FUZZ_EXPECT(lseq::parse_nbest_entry(rescored, again).empty(), "a rescored entry does not parse: " + rescored);
    LSEQ_FUZZ_EXPECT(again.line == entry.line && again.text == entry.text,
                     "adding a feature changed the entry's line or text: " + rescored);
  }
  return 0;
}
