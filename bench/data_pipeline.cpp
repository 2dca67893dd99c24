// Data pipeline throughput: first-time encoding of a corpus into the binary cache (pairs/s, tokens/s), opening
// the cache again, and the batcher reading batches from it (tokens/s on one core without the prefetch thread,
// and with it), plus the padding ratio of the batches. Reports, never asserts.
//
//   bench_data_pipeline CORPUS_PREFIX | SRC TGT  --vocab spm.model [--max-tokens 4096] [--langs de,en] ...
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>

#include <unistd.h>

#include "bench_support.h"
#include "data/batcher.h"
#include "data/corpus_cache.h"
#include "data/vocab.h"
#include "util/error.h"

namespace fs = std::filesystem;
using namespace lseq::data;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// CPU seconds of the whole process (all threads): on a shared machine, tokens per CPU second is the honest
// "per core" figure, wall time also counts the time other processes held the cores.
static double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

struct EpochStats {
  int64_t batches = 0, sentences = 0, real = 0, padded = 0;
  double seconds = 0, cpu_seconds = 0;
};

// Pulls batches until `min_seconds` passed and at least one epoch is done.
static EpochStats drain(Batcher& batcher, double min_seconds) {
  EpochStats s;
  const auto start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  for (;;) {
    const Batch b = batcher.next();
    ++s.batches;
    s.sentences += b.size;
    s.real += b.src_tokens() + b.tgt_tokens();
    s.padded += int64_t(b.size) * (b.src_len + b.tgt_len);
    if (batcher.epoch_finished() && (s.seconds = seconds_since(start)) >= min_seconds) break;
  }
  s.cpu_seconds = process_cpu_seconds() - cpu_start;
  return s;
}

int main(int argc, char** argv) {
  std::vector<std::string> corpus;
  std::string vocab_path, cache_dir;
  std::vector<std::string> langs = {"de", "en"};
  int64_t max_tokens = 4096;
  int maxi_batch = 100, max_length = 0, vocab_size = 8000, threads = 0;
  double min_seconds = 3;
  try {
    lseq::bench::Args args(argc, argv, {"help"},
                           {"vocab", "max-tokens", "mini-batch-words", "maxi-batch", "max-length", "langs",
                            "dim-vocabs", "cache-dir", "threads", "min-seconds"});
    if (args.flag("help") || args.positional().empty() || args.get("vocab", "").empty()) {
      fmt::print(
          "usage: {} CORPUS_PREFIX | SRC TGT --vocab spm.model [--max-tokens 4096] [--maxi-batch 100] "
          "[--max-length 0] [--langs de,en] [--dim-vocabs 8000] [--cache-dir DIR] [--threads 0] [--min-seconds 3]\n"
          "  --vocab is trained on the corpus when missing; the cache goes to a fresh temp dir unless --cache-dir "
          "is given (so encoding is timed)\n",
          argv[0]);
      return args.flag("help") ? 0 : 2;
    }
    corpus = args.positional();
    vocab_path = args.get("vocab", "");
    max_tokens = args.get_int("max-tokens", args.get_int("mini-batch-words", max_tokens));
    maxi_batch = static_cast<int>(args.get_int("maxi-batch", maxi_batch));
    max_length = static_cast<int>(args.get_int("max-length", max_length));
    vocab_size = static_cast<int>(args.get_int("dim-vocabs", vocab_size));
    threads = static_cast<int>(args.get_int("threads", threads));
    min_seconds = args.get_double("min-seconds", min_seconds);
    cache_dir = args.get("cache-dir", "");
    const std::string lang_list = args.get("langs", "de,en");
    const std::size_t comma = lang_list.find(',');
    if (comma == std::string::npos) lseq::fail("--langs expects two suffixes separated by a comma, e.g. de,en");
    langs = {lang_list.substr(0, comma), lang_list.substr(comma + 1)};
  } catch (const lseq::Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }

  try {
    if (corpus.size() == 1) corpus = {corpus[0] + "." + langs[0], corpus[0] + "." + langs[1]};
    if (corpus.size() != 2) lseq::fail("give a corpus prefix or two files");
    if (!fs::exists(vocab_path)) {
      VocabTrainOptions vo;
      vo.vocab_size = vocab_size;
      const auto start = Clock::now();
      Vocab::train(corpus, vocab_path, vo);
      fmt::print("vocab training: {:.1f} s ({} pieces)\n", seconds_since(start), vocab_size);
    }
    const Vocab vocab = Vocab::load(vocab_path);
    const bool own_cache_dir = cache_dir.empty();
    if (own_cache_dir) cache_dir = (fs::temp_directory_path() / fmt::format("lseq-bench-cache-{}", ::getpid())).string();

    CorpusOptions co;
    co.files = corpus;
    co.max_length = max_length;
    co.cache_dir = cache_dir;
    co.threads = threads;
    auto start = Clock::now();
    double cpu_start = process_cpu_seconds();
    auto encoded = EncodedCorpus::open_or_build(co, {&vocab, &vocab});
    const double build_s = seconds_since(start), build_cpu_s = process_cpu_seconds() - cpu_start;
    const int64_t tokens = encoded->total_tokens(0) + encoded->total_tokens(1);
    fmt::print("corpus: {} pairs kept of {} lines, {} tokens ({} bytes/token), cache {}\n", encoded->size(),
               encoded->lines_read(), tokens, encoded->token_bytes(), encoded->cache_path());
    fmt::print("{}: {:.2f} s, {:.0f} pairs/s, {:.2f} M tokens/s wall ({} encoding threads); {:.0f} pairs per CPU "
               "second\n",
               encoded->from_cache() ? "cache read (existing)" : "first-time encoding", build_s,
               encoded->lines_read() / build_s, tokens / build_s / 1e6,
               threads > 0 ? threads : int(std::thread::hardware_concurrency()), encoded->lines_read() / build_cpu_s);
    encoded.reset();
    start = Clock::now();
    encoded = EncodedCorpus::open_or_build(co, {&vocab, &vocab});
    fmt::print("reopen from cache: {:.3f} s (includes hashing the corpus files' identity)\n", seconds_since(start));

    BatcherOptions bo;
    bo.mini_batch_words = max_tokens;
    bo.maxi_batch = maxi_batch;
    for (int prefetch : {0, 8}) {
      bo.prefetch = prefetch;
      Batcher batcher(encoded, bo);
      start = Clock::now();
      const int64_t planned = batcher.batches_in_epoch(1);
      const double plan_s = seconds_since(start);
      const EpochStats s = drain(batcher, min_seconds);
      fmt::print("batcher prefetch={}: {} batches ({:.1f} sentences/batch) in {:.2f} s: {:.1f} M real tokens/s "
                 "({:.1f} M padded tokens/s, {:.0f} batches/s) wall; {:.1f} M real tokens per CPU second (all "
                 "threads); planning an epoch {:.3f} s ({} batches)\n",
                 prefetch, s.batches, double(s.sentences) / s.batches, s.seconds, s.real / s.seconds / 1e6,
                 s.padded / s.seconds / 1e6, s.batches / s.seconds, s.real / s.cpu_seconds / 1e6, plan_s, planned);
      if (prefetch == 0) fmt::print("padding ratio (padded / real tokens, both sides): {:.3f}\n", double(s.padded) / s.real);
    }
    bo.prefetch = 0;
    bo.sort_by_length = false;
    Batcher unsorted(encoded, bo);
    const EpochStats u = drain(unsorted, 0);
    fmt::print("padding ratio without length sorting: {:.3f}\n", double(u.padded) / u.real);
    encoded.reset();
    if (own_cache_dir) fs::remove_all(cache_dir);
  } catch (const lseq::Error& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  return 0;
}
