// Corpus files (--train-sets, --valid-sets), plain and gzip: CorpusFileReader and CorpusReader over the input
// written to a file as it is (a gzip input is read as gzip) and, compressed here, as a valid .gz of the same bytes.
// Promises checked: a line holds no '\n', ends in no '\r' and is valid UTF-8; line numbers count up by one; a plain
// read finds as many lines as the bytes hold; the .gz gives the same lines as the plain file, and reading the two
// as a parallel corpus gives identical sides.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus_reader.h"
#include "data/utf8.h"
#include "fuzz_support.h"

namespace {

std::string gzip(std::string_view bytes) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) std::abort();
  std::string out(deflateBound(&z, bytes.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) std::abort();
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// All lines of one file, checking each; lseq::Error escapes.
std::vector<std::string> read_lines(const std::string& path) {
  lseq::data::CorpusFileReader reader(path);
  std::vector<std::string> lines;
  std::string_view line;
  while (reader.next(line)) {
    LSEQ_FUZZ_EXPECT(line.find('\n') == std::string_view::npos, "a line holds a newline");
    LSEQ_FUZZ_EXPECT(line.empty() || line.back() != '\r', "a line keeps its '\\r'");
    LSEQ_FUZZ_EXPECT(lseq::data::is_valid_utf8(line), "a line is not valid UTF-8");
    lines.emplace_back(line);
    LSEQ_FUZZ_EXPECT(reader.line_number() == static_cast<int64_t>(lines.size()), "line numbers skip");
  }
  return lines;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  lseq::fuzz::quiet_logging();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string raw = lseq::fuzz::scratch_file("corpus.txt"), packed = lseq::fuzz::scratch_file("corpus.gz");
  lseq::fuzz::write_bytes(raw, bytes);
  lseq::fuzz::write_bytes(packed, gzip(bytes));
  const bool gzip_input = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;

  std::vector<std::string> plain_lines, packed_lines;
  const bool plain_ok = lseq::fuzz::guarded([&] { plain_lines = read_lines(raw); });
  const bool packed_ok = lseq::fuzz::guarded([&] { packed_lines = read_lines(packed); });
  if (gzip_input) return 0;  // the raw file was read as gzip: its lines are other bytes than the .gz's

  LSEQ_FUZZ_EXPECT(plain_ok == packed_ok, "a plain file and its .gz are not both accepted or both refused");
  if (!plain_ok) return 0;
  LSEQ_FUZZ_EXPECT(plain_lines == packed_lines, "a plain file and its .gz give different lines");
  size_t newlines = 0;
  for (char c : bytes) newlines += c == '\n';
  const size_t expected = newlines + (size > 0 && bytes.back() != '\n' ? 1 : 0);
  LSEQ_FUZZ_EXPECT(plain_lines.size() == expected, "the reader found another number of lines than the file has");

  lseq::data::CorpusReader pairs({raw, packed});
  std::vector<std::string_view> sides;
  int64_t kept = 0;
  while (pairs.next(sides)) {
    LSEQ_FUZZ_EXPECT(sides.size() == 2 && sides[0] == sides[1], "the sides of a pair differ");
    LSEQ_FUZZ_EXPECT(!sides[0].empty(), "a pair with an empty side was kept");
    ++kept;
  }
  LSEQ_FUZZ_EXPECT(pairs.lines_read() == static_cast<int64_t>(expected), "the parallel reader lost lines");
  LSEQ_FUZZ_EXPECT(kept + pairs.skipped_empty() == pairs.lines_read(), "pairs kept and skipped do not add up");
  return 0;
}
