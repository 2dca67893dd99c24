// Data pipeline throughput: first-time encoding of a corpus into the binary cache (pairs/s, tokens/s), opening
// the cache again, and the batcher reading batches from it (tokens/s on one core without the prefetch thread,
// and with it), plus the padding ratio of the batches. Reports, never asserts.
//
//   bench_data_pipeline --train-sets SRC TGT --vocabs spm.model [--mini-batch-words 4096] [--maxi-batch 100]
//     [--max-length N (default: no limit)] [--dim-vocabs 8000] [--cache-dir DIR] [--cpu-threads 0]
//     [--min-seconds 3]                                    (the benchmarks' options: bench_data_pipeline --help)
// --vocabs is trained on the corpus (--dim-vocabs pieces) when missing; the cache goes to a fresh temporary
// directory unless --cache-dir is given, so that encoding is timed.
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "bench_options.h"
#include "core/cli/app_main.h"
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

// The SentencePiece model at `path`, trained on the corpus first when missing.
static Vocab load_or_train_vocab(const std::vector<std::string>& corpus, const std::string& path, int size) {
  if (!fs::exists(path)) {
    VocabTrainOptions vo;
    vo.vocab_size = size;
    const auto start = Clock::now();
    Vocab::train(corpus, path, vo);
    fmt::print("vocab training: {:.1f} s ({} pieces)\n", seconds_since(start), size);
  }
  return Vocab::load(path);
}

// The batcher over the encoded corpus, without and with the prefetch thread, then without length sorting.
static void time_batchers(const std::shared_ptr<const EncodedCorpus>& encoded, BatcherOptions bo, double min_seconds) {
  for (int prefetch : {0, 8}) {
    bo.prefetch = prefetch;
    Batcher batcher(encoded, bo);
    const auto start = Clock::now();
    const int64_t planned = batcher.batches_in_epoch(1);
    const double plan_s = seconds_since(start);
    const EpochStats s = drain(batcher, min_seconds);
    fmt::print("batcher prefetch={}: {} batches ({:.1f} sentences/batch) in {:.2f} s: {:.1f} M real tokens/s "
               "({:.1f} M padded tokens/s, {:.0f} batches/s) wall; {:.1f} M real tokens per CPU second (all "
               "threads); planning an epoch {:.3f} s ({} batches)\n",
               prefetch, s.batches, double(s.sentences) / s.batches, s.seconds, s.real / s.seconds / 1e6,
               s.padded / s.seconds / 1e6, s.batches / s.seconds, s.real / s.cpu_seconds / 1e6, plan_s, planned);
    if (prefetch == 0)
      fmt::print("padding ratio (padded / real tokens, both sides): {:.3f}\n", double(s.padded) / s.real);
  }
  bo.prefetch = 0;
  bo.sort_by_length = false;
  Batcher unsorted(encoded, bo);
  const EpochStats u = drain(unsorted, 0);
  fmt::print("padding ratio without length sorting: {:.3f}\n", double(u.padded) / u.real);
}

static int run(const lseq::Options& options) {
  const std::vector<std::string> corpus = options.get_strings("train-sets");
  const std::vector<std::string> vocabs = options.get_strings("vocabs");
  if (corpus.size() != 2) lseq::fail("bench_data_pipeline needs --train-sets SRC TGT: the corpus to encode");
  if (vocabs.size() != 1)
    lseq::fail("bench_data_pipeline needs --vocabs spm.model: one SentencePiece model for both sides (trained on the "
               "corpus when missing)");
  const int threads = static_cast<int>(options.get_int("cpu-threads"));
  const Vocab vocab = load_or_train_vocab(corpus, vocabs[0], lseq::bench::vocab_sizes(options, 8000).src);
  std::string cache_dir = options.get_string("cache-dir");
  const bool own_cache_dir = cache_dir.empty();
  if (own_cache_dir) cache_dir = (fs::temp_directory_path() / fmt::format("lseq-bench-cache-{}", ::getpid())).string();

  CorpusOptions co;
  co.files = corpus;
  co.max_length = static_cast<int>(lseq::bench::int_or(options, "max-length", 0));
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
  bo.mini_batch_words = lseq::bench::int_or(options, "mini-batch-words", 4096);
  bo.maxi_batch = static_cast<int>(options.get_int("maxi-batch"));
  time_batchers(encoded, bo, options.get_float("min-seconds"));
  encoded.reset();
  if (own_cache_dir) fs::remove_all(cache_dir);
  return 0;
}

int main(int argc, char** argv) { return lseq::app_main(lseq::App::bench, argc, argv, run); }
