// lseval: corpus BLEU and chrF of translations against references, computed as sacreBLEU does by default, printed
// with a sacreBLEU-style signature. The quickstart uses it to score lstranslate's output.
//   lseval -r test.en [-i hyps.en] [-m bleu chrf]      (hypotheses from standard input by default)
#include <cstdio>
#include <string>
#include <vector>

#include "core/cli/app_main.h"
#include "data/input_line_reader.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "util/error.h"

namespace lseq {
namespace {

std::vector<std::string> read_lines(const std::vector<std::string>& paths, const char* option) {
  data::InputLineReader reader(paths, option);
  std::vector<std::string> lines;
  for (std::string line; reader.next(line);) lines.push_back(line);
  return lines;
}

std::string joined(const std::vector<std::string>& paths) {
  std::string out;
  for (const std::string& p : paths) out += (out.empty() ? "" : " ") + p;
  return out;
}

int run_eval(const Options& options) {
  const std::vector<std::string> reference_files = options.get_strings("references");
  const std::vector<std::string> input_files = options.get_strings("input");
  if (reference_files.empty()) fail("lseval needs --references (-r) FILE: the reference translations");
  const std::vector<std::string> refs = read_lines(reference_files, "--references");
  const std::vector<std::string> hyps = read_lines(input_files, "--input");
  if (hyps.size() != refs.size()) {
    fail("--input {} has {} lines but --references {} has {}; every translation needs one reference",
         joined(input_files), hyps.size(), joined(reference_files), refs.size());
  }
  for (const std::string& metric : options.get_strings("metrics")) {
    if (metric == "bleu") {
      const auto bleu = metrics::corpus_bleu(hyps, refs);
      std::printf("%s\t%s\n", bleu.format().c_str(), bleu.signature().c_str());
    } else {
      const auto chrf = metrics::corpus_chrf(hyps, refs);
      std::printf("%s\t%s\n", chrf.format().c_str(), chrf.signature().c_str());
    }
  }
  return 0;
}

}  // namespace
}  // namespace lseq

int main(int argc, char** argv) { return lseq::app_main(lseq::App::eval, argc, argv, lseq::run_eval); }
