// lsserve: loads the model as lstranslate does (its decoder.yml merged by parse_options), plans it once for the
// largest batch per decoding thread, starts them and serves HTTP until SIGTERM or SIGINT has drained it.
#include "serve_app.h"

#include <spdlog/spdlog.h>

#include <csignal>
#include <optional>
#include <thread>
#include <vector>

#include "core/cli/backend_select.h"
#include "core/cli/model_loader.h"
#include "core/serve/decode_worker.h"
#include "core/serve/scheduler.h"
#include "core/serve/serve_metrics.h"
#include "data/vocab.h"
#include "drain_signal.h"
#include "http_server.h"
#include "util/error.h"

namespace lseq {

namespace {

// The search of requests that give no options: lstranslate's settings from the same options (a language model's
// continuations: up to --max-length new tokens within its positions, as lstranslate's).
TranslateSettings default_settings(const Options& options, const std::optional<LanguageModelLimits>& lm) {
  TranslateSettings s;
  s.beam.beam_size = static_cast<int>(options.get_int("beam-size"));
  s.beam.normalize = options.get_float("normalize");
  s.beam.word_penalty = options.get_float("word-penalty");
  s.beam.max_length_factor = options.get_float("max-length-factor");
  if (lm) {
    s.beam.max_new_tokens = lm->new_tokens;
    s.beam.max_context = lm->context;
  }
  s.n_best = options.get_bool("n-best");
  s.word_scores = options.get_bool("word-scores");
  // Requests may ask for sampling whatever the server's default: the base is always filled.
  s.sampling.seed = static_cast<uint64_t>(options.get_int("seed"));
  s.sampling.normalize = s.beam.normalize;
  s.sampling.word_penalty = s.beam.word_penalty;
  s.sampling.max_length_factor = s.beam.max_length_factor;
  s.sampling.max_new_tokens = s.beam.max_new_tokens;
  s.sampling.max_context = s.beam.max_context;
  const std::vector<std::string> sampling = options.get_strings("output-sampling");
  if (!sampling.empty()) {
    s.sampling = parse_output_sampling(sampling, s.sampling);
    s.sample = true;
  }
  return s;
}

}  // namespace

int run_serve(const Options& options) {
  DrainSignal signals;  // until armed, a signal ends lsserve at once
  const ModelFiles files = find_model_files(options.get_string("model"));
  // A language model's sentences are prompts, continued by up to --max-length new tokens (lstranslate's rules).
  std::optional<LanguageModelLimits> lm{LanguageModelLimits{}};
  if (!is_language_model(files, options, &*lm)) lm.reset();
  const TranslateSettings defaults = default_settings(options, lm);
  if (options.get_int("mini-batch") == 0 && options.get_int("mini-batch-words") == 0)
    fail("--mini-batch and --mini-batch-words are both 0; set at least one of them");

  const bool encode = !options.get_bool("no-spm-encode"), decode = !options.get_bool("no-spm-decode");
  const ModelVocabs vocabs = load_model_vocabs(files, encode || decode, "--no-spm-encode and --no-spm-decode");
  const std::optional<data::Vocab>& source_vocab = vocabs.source;
  const std::optional<data::Vocab>& target_vocab = vocabs.target;
  const ModelVocabSizes& sizes = vocabs.sizes;
  // Planned once for --mini-batch sentences x --beam-size hypotheses of up to --max-length tokens: no batch the
  // scheduler forms is larger, so serving allocates nothing on the device. One per decoding thread, each on its
  // own backend (stream): at half load on an H100 one thread was busy all the time with small batches, and a
  // batch holding one long sentence (70 ms instead of 9) held up everything that came meanwhile.
  const std::vector<std::unique_ptr<StepModel>> models = load_decoders(files, options);
  const int decoders = static_cast<int>(models.size());

  serve::SchedulerOptions scheduling;
  scheduling.limits.max_sentences = static_cast<int>(options.get_int("mini-batch"));
  scheduling.limits.max_tokens = options.get_int("mini-batch-words");
  scheduling.limits.fixed_cost = options.get_float("batch-fixed-cost");
  if (scheduling.limits.max_sentences == 0) {
    // load_step_model planned for --mini-batch-words one-token sentences: the most a batch can hold.
    scheduling.limits.max_sentences = static_cast<int>(scheduling.limits.max_tokens);
  }
  scheduling.max_queue = static_cast<int>(options.get_int("max-queue"));
  scheduling.max_wait = std::chrono::duration_cast<serve::Clock::duration>(
      std::chrono::duration<double, std::milli>(options.get_float("max-wait-ms")));

  HttpServerConfig http;
  http.bind = options.get_string("bind");
  http.port = static_cast<int>(options.get_int("port"));
  http.threads = static_cast<int>(options.get_int("http-threads"));
  http.max_request_bytes = static_cast<size_t>(options.get_int("max-request-bytes"));
  http.request_timeout_seconds = options.get_float("request-timeout");
  http.limits.max_sentences = static_cast<int>(options.get_int("max-request-sentences"));
  http.limits.max_beam_size = defaults.beam.beam_size;
  http.limits.max_queue = scheduling.max_queue;
  http.limits.language_model = lm.has_value();
  http.limits.max_new_tokens = lm ? lm->new_tokens : 0;
  http.encoding.max_length = lm ? lm->prompt_tokens : static_cast<int>(options.get_int("max-length"));
  http.encoding.prompts = lm.has_value();
  http.encoding.crop = options.get_bool("max-length-crop");
  http.encoding.vocab_size = sizes.source;
  if (encode) http.encoding.encoder = [&](std::string_view text) { return source_vocab->encode(text); };
  if (decode) http.detokenize = [&](const std::vector<int32_t>& ids) { return target_vocab->decode(ids); };
  http.defaults = defaults;
  http.decoder_gauges = [&models](serve::ServeGauges& gauges) {
    for (const auto& model : models) {
      const StepModel::RecordedSteps steps = model->recorded_steps();
      gauges.recorded_steps += steps.held;
      gauges.step_recordings += steps.made;
    }
  };

  serve::Scheduler scheduler(scheduling);
  serve::ServeMetrics metrics(scheduling.limits.max_sentences);
  std::vector<std::unique_ptr<serve::DecodeWorker>> workers;
  const bool continuous = options.get_bool("continuous-batching");
  for (auto& model : models)
    workers.push_back(std::make_unique<serve::DecodeWorker>(*model, scheduler, metrics, continuous));
  const auto join_workers = [&] {
    for (auto& worker : workers) worker->join();
  };
  HttpServer server(std::move(http), scheduler, metrics);
  const int port = server.bind();
  for (auto& worker : workers) worker->start();
  signals.arm();
  std::thread drainer([&] {
    const int signal = signals.wait();
    if (signal == 0) return;
    spdlog::info("{}: draining: new requests get 503; answering the {} waiting sentences", signal == SIGINT ? "SIGINT"
                                                                                                           : "SIGTERM",
                 scheduler.waiting());
    server.drain();
  });
  spdlog::info("lsserve: listening on http://{}:{} (POST /translate, GET /health, GET /metrics); batches of up to {} "
               "{} and {} tokens, beam size up to {}{}; {} decoding thread{}",
               options.get_string("bind"), port, scheduling.limits.max_sentences, lm ? "prompts" : "sentences",
               scheduling.limits.max_tokens, defaults.beam.beam_size,
               lm ? fmt::format(", up to {} new tokens", lm->new_tokens) : std::string(), decoders,
               decoders == 1 ? "" : "s");
  try {
    server.serve();
  } catch (...) {
    signals.release();
    drainer.join();
    scheduler.close();
    join_workers();
    throw;
  }
  signals.release();
  drainer.join();
  scheduler.close();
  join_workers();
  spdlog::info("lsserve: drained; exiting");
  return 0;
}

}  // namespace lseq
