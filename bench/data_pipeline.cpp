// Data pipeline throughput: first-time encoding of a corpus into the binary cache (pairs/s, tokens/s), opening
// the cache again, and the batcher reading batches from it (tokens/s on one core without the prefetch thread,
// and with it), plus the padding ratio of the batches. Reports, never asserts.
//
//   bench_data_pipeline CORPUS_PREFIX | SRC TGT  --vocab spm.model [--max-tokens 4096] [--langs de en] ...
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>

#include <unistd.h>

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
  CLI::App app{"lseq data pipeline benchmark"};
  std::vector<std::string> corpus;
  std::string vocab_path, cache_dir;
  std::vector<std::string> langs = {"de", "en"};
  int64_t max_tokens = 4096;
  int maxi_batch = 100, max_length = 0, vocab_size = 8000, threads = 0;
  double min_seconds = 3;
  app.add_option("corpus", corpus, "corpus prefix (PREFIX.de PREFIX.en) or the two files")->required();
  app.add_option("--vocab", vocab_path, "SentencePiece model (trained on the corpus when missing)")->required();
  app.add_option("--max-tokens,--mini-batch-words", max_tokens, "padded tokens per batch");
  app.add_option("--maxi-batch", maxi_batch, "maxi-batch size (mini-batches sorted together)");
  app.add_option("--max-length", max_length, "skip pairs longer than this (0: keep all)");
  app.add_option("--langs", langs, "suffixes of a corpus prefix")->expected(2);
  app.add_option("--dim-vocabs", vocab_size, "size of a vocabulary trained here");
  app.add_option("--cache-dir", cache_dir, "where the cache goes (default: a fresh temp dir, so encoding is timed)");
  app.add_option("--threads", threads, "encoding threads (0: all cores)");
  app.add_option("--min-seconds", min_seconds, "run the batcher at least this long (whole epochs)");
  CLI11_PARSE(app, argc, argv);

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
