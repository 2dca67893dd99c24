// lseval: corpus BLEU and chrF of translations against references, computed as sacreBLEU does by default, printed
// with a sacreBLEU-style signature. The quickstart uses it to score lstranslate's output.
//   lseval -r test.en [-i hyps.en] [-m bleu chrf]      (hypotheses from standard input by default)
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "data/input_line_reader.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "util/error.h"

namespace {

const char* kUsage =
    "usage: lseval -r REFERENCES [-i HYPOTHESES] [-m bleu chrf]\n"
    "  -r, --references FILE   one reference translation per line\n"
    "  -i, --input FILE        one hypothesis per line (default: standard input)\n"
    "  -m, --metrics NAME...   bleu and/or chrf (default: both)\n";

struct Arguments {
  std::string references, input = "stdin";
  std::vector<std::string> metrics = {"bleu", "chrf"};
};

Arguments parse(int argc, char** argv) {
  Arguments a;
  bool metrics_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) lseq::fail("option '{}' needs a value; see lseval --help", arg);
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "-r" || arg == "--references") {
      a.references = value();
    } else if (arg == "-i" || arg == "--input") {
      a.input = value();
    } else if (arg == "-m" || arg == "--metrics") {
      if (!metrics_given) a.metrics.clear();
      metrics_given = true;
      a.metrics.push_back(value());
      while (i + 1 < argc && argv[i + 1][0] != '-') a.metrics.push_back(argv[++i]);
    } else {
      lseq::fail("unknown argument '{}'; see lseval --help", arg);
    }
  }
  if (a.references.empty()) lseq::fail("lseval needs -r/--references FILE; see lseval --help");
  for (const std::string& m : a.metrics) {
    if (m != "bleu" && m != "chrf") lseq::fail("unknown metric '{}'; choose bleu and/or chrf", m);
  }
  return a;
}

std::vector<std::string> read_lines(const std::string& path) {
  lseq::data::InputLineReader reader({path});
  std::vector<std::string> lines;
  std::string line;
  while (reader.next(line)) lines.push_back(line);
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Arguments args = parse(argc, argv);
    const std::vector<std::string> refs = read_lines(args.references);
    const std::vector<std::string> hyps = read_lines(args.input);
    if (hyps.size() != refs.size()) {
      lseq::fail("{} has {} lines but the references {} have {}; every hypothesis needs one reference",
                 args.input, hyps.size(), args.references, refs.size());
    }
    for (const std::string& m : args.metrics) {
      if (m == "bleu") {
        const auto bleu = lseq::metrics::corpus_bleu(hyps, refs);
        std::printf("%s\t%s\n", bleu.format().c_str(), bleu.signature().c_str());
      } else {
        const auto chrf = lseq::metrics::corpus_chrf(hyps, refs);
        std::printf("%s\t%s\n", chrf.format().c_str(), chrf.signature().c_str());
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
