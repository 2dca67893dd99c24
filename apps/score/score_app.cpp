// lsscore: scores sentence pairs (--train-sets source target) or rescores an n-best list (--n-best, with the list
// as the second file) with the model in --model (core/scorer.h); a language model scores the lines of one file.
#include "score_app.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <optional>

#include "core/cli/app_io.h"
#include "core/cli/backend_select.h"
#include "core/cli/model_loader.h"
#include "core/search/scorer.h"
#include "data/input_line_reader.h"
#include "data/vocab.h"
#include "util/error.h"
#include "util/process_end.h"

namespace lseq {

int run_score(const Options& options) {
  const auto load_begin = std::chrono::steady_clock::now();
  const std::vector<std::string> sets = options.get_strings("train-sets");
  const bool n_best = options.get_bool("n-best");
  const ModelFiles files = find_model_files(options.get_string("model"));
  LanguageModelLimits lm;
  const bool language_model = is_language_model(files, options, &lm);
  if (language_model) {
    if (n_best) fail("--n-best rescores translations; a language model scores the lines of one file");
    if (sets.size() != 1) fail("a language model scores one file: --train-sets needs 1 file, {} given", sets.size());
  } else if (sets.size() != 2) {
    fail("--train-sets needs 2 files ({}), {} given", n_best ? "source and n-best list" : "source and target",
         sets.size());
  }

  ScoreSettings settings;
  settings.normalize = options.get_float("normalize");
  settings.summary = options.get_bool("summary");
  settings.word_scores = options.get_bool("word-scores");
  settings.n_best_feature = options.get_string("n-best-feature");
  settings.batching = input_options(options);
  if (language_model) settings.batching.max_length = lm.scored_tokens;  // within the model's positions
  if (settings.summary && n_best) fail("--summary and --n-best cannot be combined; choose one");

  const bool encode = !options.get_bool("no-spm-encode");
  const ModelVocabs vocabs = load_model_vocabs(files, encode, "--no-spm-encode");
  const std::optional<data::Vocab>& source_vocab = vocabs.source;
  const std::optional<data::Vocab>& target_vocab = vocabs.target;
  const ModelVocabSizes& sizes = vocabs.sizes;
  settings.batching.vocab_size = sizes.source;  // ids given with --no-spm-encode are checked line by line
  settings.target_vocab_size = sizes.target;
  std::unique_ptr<StepModel> model = load_step_model(files, options);
  data::TextEncoder encode_source, encode_target;
  if (encode) {
    encode_source = [&](std::string_view text) { return source_vocab->encode(text); };
    encode_target = [&](std::string_view text) { return target_vocab->encode(text); };
  }

  data::InputLineReader source(std::vector<std::string>{sets[0]}, "--train-sets");
  OutputStream out(options.get_string("output"));
  const auto begin = std::chrono::steady_clock::now();
  ScoreTotals totals;
  if (language_model) {
    totals = score_lines(*model, source, encode_target, settings, out.get());
  } else {
    data::InputLineReader second(std::vector<std::string>{sets[1]}, "--train-sets");
    totals = n_best ? rescore_nbest(*model, source, second, encode_source, encode_target, settings, out.get())
                    : score_pairs(*model, source, second, encode_source, encode_target, settings, out.get());
  }
  if (settings.summary) out.get() << format_summary(totals) << '\n';
  out.close();
  const auto end = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(end - begin).count();
  const double per_second = seconds > 0 ? 1.0 / seconds : 0.0;
  // As lstranslate's summary line (bench/ parses it): target tokens count each scored line's eos.
  spdlog::info("Scored {} lines ({} target tokens) in {:.2f} s: {:.1f} lines/s, {:.0f} target tokens/s; model load "
               "{:.2f} s",
               totals.lines, totals.target_tokens, seconds, totals.lines * per_second,
               totals.target_tokens * per_second, std::chrono::duration<double>(begin - load_begin).count());
  if (totals.scored < totals.lines)
    spdlog::warn("{} of {} lines were not scored (see the warnings above)", totals.lines - totals.scored, totals.lines);
  if (runs_on_gpu(options)) exit_without_teardown(0);  // everything is written: skip the GPU teardown
  return 0;
}

}  // namespace lseq
