// lstranslate: reads the model directory (its decoder.yml was merged by parse_options), then translates the
// --input lines to --output (core/translator.h); with a language model each line is a prompt and the output its
// continuation.
#include "translate_app.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/cli/app_io.h"
#include "core/cli/backend_select.h"
#include "core/cli/model_loader.h"
#include "core/search/translator.h"
#include "data/input_line_reader.h"
#include "data/vocab.h"
#include "util/error.h"
#include "util/process_end.h"

namespace lseq {

int run_translate(const Options& options) {
  const auto load_begin = std::chrono::steady_clock::now();
  const ModelFiles files = find_model_files(options.get_string("model"));
  // A language model continues each input line (a prompt) by up to --max-length new tokens.
  LanguageModelLimits lm;
  const bool language_model = is_language_model(files, options, &lm);

  TranslateSettings settings;
  settings.beam.beam_size = static_cast<int>(options.get_int("beam-size"));
  settings.beam.normalize = options.get_float("normalize");
  settings.beam.word_penalty = options.get_float("word-penalty");
  settings.beam.max_length_factor = options.get_float("max-length-factor");
  if (language_model) {
    settings.beam.max_new_tokens = lm.new_tokens;
    settings.beam.max_context = lm.context;
  }
  settings.n_best = options.get_bool("n-best");
  settings.word_scores = options.get_bool("word-scores");
  settings.continuous = options.get_bool("continuous-batching");
  const std::vector<std::string> sampling = options.get_strings("output-sampling");
  if (!sampling.empty()) {
    SamplingOptions base;
    base.seed = static_cast<uint64_t>(options.get_int("seed"));
    base.normalize = settings.beam.normalize;
    base.word_penalty = settings.beam.word_penalty;
    base.max_length_factor = settings.beam.max_length_factor;
    base.max_new_tokens = settings.beam.max_new_tokens;
    base.max_context = settings.beam.max_context;
    settings.sampling = parse_output_sampling(sampling, base);
    settings.sample = true;
  }

  const bool encode = !options.get_bool("no-spm-encode"), decode = !options.get_bool("no-spm-decode");
  const ModelVocabs vocabs = load_model_vocabs(files, encode || decode, "--no-spm-encode and --no-spm-decode");
  const std::optional<data::Vocab>& source_vocab = vocabs.source;
  const std::optional<data::Vocab>& target_vocab = vocabs.target;
  const ModelVocabSizes& sizes = vocabs.sizes;
  // --decoders copies of the model, each on its own backend (stream), searching batches side by side.
  std::function<std::unique_ptr<StepModel>()> make_another;
  const std::vector<std::unique_ptr<StepModel>> models =
      load_decoders(files, options, WarmedDecoders::first_of_language_model, &make_another);
  std::vector<StepModel*> decoders;
  for (const auto& model : models) decoders.push_back(model.get());
  // More decoders once a continuous translation's input proves long (translate_all: ExtraDecoders).
  ExtraDecoders extra;
  extra.count = extra_decoder_count(options, static_cast<int>(decoders.size()));
  extra.after_batches = int64_t{kBatchesPerDecoderBeforeExtra} * static_cast<int64_t>(decoders.size());
  extra.make = make_another;

  data::TranslationInputOptions input_opts = input_options(options);
  input_opts.vocab_size = sizes.source;  // ids given with --no-spm-encode are checked line by line
  if (language_model) input_opts.max_length = lm.prompt_tokens;  // --max-length counts new tokens here
  // Continuous decoding goes from window to window without draining: a first window of two batches a decoder lets
  // it start once those are read instead of after the whole first --maxi-batch window (16,000 lines on an H200:
  // 0.17 s of 1.25 s waited for input, most of it for the first 12,800).
  if (decodes_continuously(decoders, settings))
    input_opts.first_maxi_batch = 2 * static_cast<int>(decoders.size());
  data::TextEncoder encoder;
  if (encode) encoder = [&](std::string_view text) { return source_vocab->encode(text); };
  Detokenizer detokenize;
  if (decode) detokenize = [&](const std::vector<int32_t>& ids) { return target_vocab->decode(ids); };

  data::InputLineReader reader(options.get_strings("input"));
  data::TranslationInput input(reader, encoder, input_opts);
  OutputStream out(options.get_string("output"));
  std::vector<StepModel::RunCounts> loaded_runs;  // the warm-up's, left out of the debug lines below
  for (const StepModel* decoder : decoders) loaded_runs.push_back(decoder->run_counts());
  const auto begin = std::chrono::steady_clock::now();
  const double load_seconds = std::chrono::duration<double>(begin - load_begin).count();
  const double progress_seconds = options.get_bool("quiet-translation") ? 0.0 : 10.0;
  const TranslationTotals totals =
      translate_all(decoders, input, detokenize, settings, out.get(), progress_seconds, extra);
  out.close();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  const double per_second = seconds > 0 ? 1.0 / seconds : 0.0;
  // bench/ and tests/ parse this line up to "model load N s"; what follows says where the search thread's time went.
  spdlog::info("Translated {} lines ({} target tokens) in {:.2f} s: {:.1f} lines/s, {:.0f} target tokens/s; model "
               "load {:.2f} s; search {:.2f} s, waiting for input {:.2f} s, for output {:.2f} s",
               totals.lines, totals.target_tokens, seconds, totals.lines * per_second,
               totals.target_tokens * per_second, load_seconds, totals.search_seconds, totals.input_wait_seconds,
               totals.output_wait_seconds);
  // The extra decoders' counts follow the loaded ones' (they ran no warm-up: nothing to leave out).
  std::vector<StepModel::RunCounts> runs_of;
  for (const StepModel* decoder : decoders) runs_of.push_back(decoder->run_counts());
  runs_of.insert(runs_of.end(), totals.extra_decoder_runs.begin(), totals.extra_decoder_runs.end());
  loaded_runs.resize(runs_of.size());
  for (size_t i = 0; i < runs_of.size(); ++i) {
    const StepModel::RunCounts &runs = runs_of[i], &loaded = loaded_runs[i];
    const std::size_t steps = runs.steps - loaded.steps;
    const double per_step = steps > 0 ? 1.0 / static_cast<double>(steps) : 0.0;
    spdlog::debug(
        "decoder {}: {} steps, {:.1f} live hypotheses a step ({:.1f} rows computed); {} replays of recorded steps "
        "and encodings, {} recordings ({:.3f} s), {} runs op by op ({:.3f} s of host time)",
        i, steps, static_cast<double>(runs.live_rows - loaded.live_rows) * per_step,
        static_cast<double>(runs.computed_rows - loaded.computed_rows) * per_step, runs.replays - loaded.replays,
        runs.recordings - loaded.recordings, runs.recording_seconds - loaded.recording_seconds,
        runs.op_by_op - loaded.op_by_op, runs.op_by_op_seconds - loaded.op_by_op_seconds);
  }
  if (totals.line_breaks_replaced > 0)
    spdlog::warn("{} outputs held line breaks (the model's tokens decode to them); they were written as spaces, so "
                 "that every input line has one output line (--no-spm-decode writes the ids instead)",
                 totals.line_breaks_replaced);
  if (runs_on_gpu(options)) exit_without_teardown(0);  // everything is written: skip the GPU teardown
  return 0;
}

}  // namespace lseq
