// Decoding throughput (issues 4 and 5): sentences/s and target tokens/s of lseq's beam search (beam 1 = greedy)
// by batch size, over synthetic sources of --src-len tokens (eos included; ids uniform in [4, vocab), seeded).
// The model: a preset with random weights (--preset configs/transformer-base.yaml, vocabulary --dim-vocabs 32000 on
// both sides, init_params(--seed)), or a trained model directory (--model DIR).
//
// Forced output length (--out-len N, default 28; 0 = free decoding): every hypothesis gets exactly N tokens, as
// Hugging Face's generate with min_new_tokens = max_new_tokens = N (bench/hf_generate.py), so both do N decoder
// steps per sentence. The search is lseq's own beam_search (what lstranslate runs: the device top-k of
// step_topk) over a wrapper StepModel that gives eos log-probability -inf for the first N steps; the length factor
// is set so that beam_search forces eos after N tokens, and that last step (where only eos may be chosen) is
// answered by the wrapper without running the model. The run checks that every output has exactly N tokens.
//
// Each case decodes one untimed warm-up batch, then --batches-per-case timed batches of fresh sources. Reports
// one RESULT line per case (bench_support.h); never asserts.
// Usage: bench_decode_throughput [--preset configs/transformer-base.yaml | --model DIR] [--cpu] [--cpu-threads N]
//   [--devices N] [--precision fp32|bf16|fp16 (default bf16, fp32 with --cpu)] [--dim-vocabs 32000]
//   [--batch-sizes 32 64 128] [--beams 1 4] [--src-len 28] [--out-len 28] [--batches-per-case 5] [--seed 1]
//   [--no-graphs: every decoding step op by op] [--input FILE: with --model, translate these lines instead]    (the benchmarks' options: bench_decode_throughput --help)
#include <fmt/format.h>

#include <chrono>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_support.h"
#include "core/cli/app_main.h"
#include "core/checkpoint/model_files.h"
#include "core/cli/model_loader.h"
#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"
#include "core/search/beam_search.h"
#include "core/search/search_types.h"
#include "data/input_line_reader.h"
#include "data/translation_input.h"
#include "data/vocab.h"
#include "util/error.h"

namespace {

using namespace lseq;

// Forwards every call and times start, the steps and select (host wall clock; a step waits for its results).
class TimedDecoder : public StepModel {
 public:
  explicit TimedDecoder(StepModel& inner) : inner_(inner) {}
  int vocab_size() const override { return inner_.vocab_size(); }
  void start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override {
    const auto begin = std::chrono::steady_clock::now();
    inner_.start(src, src_lengths, sentences, src_len);
    start_seconds += seconds_since(begin);
  }
  void select(const std::vector<int32_t>& parents, const std::vector<int32_t>& sentence_of) override {
    const auto begin = std::chrono::steady_clock::now();
    inner_.select(parents, sentence_of);
    select_seconds += seconds_since(begin);
  }
  void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) override {
    const auto begin = std::chrono::steady_clock::now();
    inner_.step(tokens, log_probs);
    step_seconds += seconds_since(begin);
    ++steps;
  }
  void step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values, std::vector<int32_t>& ids,
                 std::vector<float>& eos_log_probs) override {
    const auto begin = std::chrono::steady_clock::now();
    inner_.step_topk(tokens, k, values, ids, eos_log_probs);
    step_seconds += seconds_since(begin);
    ++steps;
  }
  int live() const override { return inner_.live(); }

  std::string report(const char* pass, std::size_t batches) const {
    const double per_batch = 1e3 / static_cast<double>(batches);
    return fmt::format("{0}_ms_start={1:.2f} {0}_ms_steps={2:.2f} {0}_ms_select={3:.2f} {0}_steps={4}", pass,
                       start_seconds * per_batch, step_seconds * per_batch, select_seconds * per_batch, steps);
  }

  double start_seconds = 0, step_seconds = 0, select_seconds = 0;
  int64_t steps = 0;

 private:
  static double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  }
  StepModel& inner_;
};

// Makes beam_search produce exactly `out_len` tokens per hypothesis: eos is impossible for the first out_len
// steps; the step after them (where beam_search, at its length limit, reads only the eos entry) is answered here
// without running the model, so the model does out_len steps per sentence, like the peer. Times what it forwards
// (TimedDecoder): where a batch's time goes, encoding the sources (start), the model's steps (upload, the step's
// ops, the wait for its top-k) and select (reordering); the rest is the search's own host work.
class ForcedLengthDecoder : public TimedDecoder {
 public:
  ForcedLengthDecoder(StepModel& inner, int out_len) : TimedDecoder(inner), out_len_(out_len) {}
  void start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override {
    position_ = 0;
    TimedDecoder::start(src, src_lengths, sentences, src_len);
  }
  void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) override {
    const std::size_t vocab = static_cast<std::size_t>(vocab_size());
    if (position_ < out_len_) {
      TimedDecoder::step(tokens, log_probs);
      for (std::size_t h = 0; h < tokens.size(); ++h)
        log_probs[h * vocab + data::kEosId] = -std::numeric_limits<float>::infinity();
    } else {
      log_probs.resize(tokens.size() * vocab);
      for (std::size_t h = 0; h < tokens.size(); ++h) log_probs[h * vocab + data::kEosId] = 0.0f;
    }
    ++position_;
  }
  // What beam_search calls: the inner decoder's device top-k (words only, eos apart), eos made impossible the same
  // way.
  void step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values, std::vector<int32_t>& ids,
                 std::vector<float>& eos_log_probs) override {
    if (position_ < out_len_) {
      TimedDecoder::step_topk(tokens, k, values, ids, eos_log_probs);
      eos_log_probs.assign(tokens.size(), -std::numeric_limits<float>::infinity());
    } else {
      values.assign(tokens.size() * k, -std::numeric_limits<float>::infinity());
      ids.assign(tokens.size() * k, -1);
      eos_log_probs.assign(tokens.size(), 0.0f);
    }
    ++position_;
  }

 private:
  int out_len_;
  int position_ = 0;  // steps since start
};

void print_status(const std::string& prefix, const char* status, const std::string& reason) {
  fmt::print("{} status={} reason={}\n", prefix, status, bench::one_word(reason));
  std::fflush(stdout);
}

// lstranslate's --max-length for this model directory: its decoder.yml's, else lstranslate's default.
int decoder_max_length(const ModelFiles& files) {
  const Options o = files.decoder_config.empty() ? default_options(App::translate)
                                                 : options_from_file(App::translate, files.decoder_config);
  return static_cast<int>(o.get_int("max-length"));
}

// --input: the lines of a file, encoded with the model directory's source vocabulary and cut into batches of
// `batch` sentences exactly as lstranslate cuts them (data::TranslationInput: maxi-batch windows sorted by length),
// decoded freely by beam_search. Only the search is timed (encoding, batching and output are not): beside
// lstranslate's own target tokens/s on the same file, what the program adds around the search. One untimed pass
// first (it records the step shapes).
template <typename PrefixOf>
void run_real_input(const Options& options, const std::string& model_dir, StepModel& decoder, int beam, int batch,
                    const PrefixOf& prefix_of) {
  const std::string prefix = prefix_of(beam, batch);
  try {
    const ModelFiles files = find_model_files(model_dir);
    if (files.source_vocab.empty()) fail("model directory '{}' has no vocabulary to encode --input with", model_dir);
    const data::Vocab vocab = data::Vocab::load(files.source_vocab);
    data::TranslationInputOptions batching;
    batching.mini_batch = batch;
    batching.mini_batch_words = 0;
    batching.maxi_batch = 100;
    batching.max_length = decoder_max_length(files);
    batching.vocab_size = vocab.size();
    std::vector<data::Batch> batches;
    data::InputLineReader reader(options.get_strings("input"));
    data::TranslationInput input(reader, [&](std::string_view text) { return vocab.encode(text); }, batching);
    for (data::InputWindow window; input.next(window);)
      for (auto& b : window.batches) batches.push_back(std::move(b));
    BeamSearchOptions o;
    o.beam_size = beam;
    o.normalize = options.get_float("normalize");
    o.max_length_factor = 3;
    // The first pass, timed apart: what a fresh lstranslate meets (every shape recorded, every kernel loaded).
    const auto* transformer = dynamic_cast<const EncoderDecoderStepModel*>(&decoder);
    auto recorded = [&] { return transformer ? transformer->recorder().recordings() : std::size_t{0}; };
    auto recording_s = [&] { return transformer ? transformer->recorder().recording_seconds() : 0.0; };
    const std::size_t recordings_before = recorded();
    const double recording_s_before = recording_s();
    TimedDecoder cold(decoder), warm(decoder);
    int64_t cold_tokens = 0;
    const auto cold_begin = std::chrono::steady_clock::now();
    for (const data::Batch& b : batches)
      for (const NBestList& list : beam_search(cold, b, o))
        if (!list.empty()) cold_tokens += static_cast<int64_t>(list[0].tokens.size());
    const double cold_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - cold_begin).count();
    const std::size_t cold_recordings = recorded() - recordings_before;
    const double cold_recording_s = recording_s() - recording_s_before;
    int64_t tokens = 0, sentences = 0;
    const auto begin = std::chrono::steady_clock::now();
    for (const data::Batch& b : batches) {
      for (const NBestList& list : beam_search(warm, b, o)) {
        ++sentences;
        if (!list.empty()) tokens += static_cast<int64_t>(list[0].tokens.size());
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    const std::size_t warm_recordings = recorded() - recordings_before - cold_recordings;
    fmt::print("{} sentences={} batches={} sent_s={:.1f} tgt_tok_s={:.0f} ms_batch={:.2f} cold_tgt_tok_s={:.0f} "
               "cold_recordings={} cold_recording_s={:.3f} warm_recordings={} {} {} status=ok\n",
               prefix, sentences, batches.size(), sentences / seconds, tokens / seconds,
               seconds * 1e3 / batches.size(), cold_tokens / cold_seconds, cold_recordings, cold_recording_s,
               warm_recordings, cold.report("cold", batches.size()), warm.report("warm", batches.size()));
    std::fflush(stdout);
  } catch (const Error& e) {
    print_status(prefix, "failed", e.what());
  }
}

int run(const Options& options) {
  const std::string model_dir = options.has("model") ? options.get_string("model") : "";
  const std::string preset_path = options.get_string("preset");
  const std::string precision = bench::precision(options);
  const bool cpu = options.get_bool("cpu");
  const bool graphs = !options.get_bool("no-graphs");
  const std::vector<int64_t> batch_sizes = bench::ints_or(options, "batch-sizes", {32, 64, 128});
  const std::vector<int64_t> beams = options.get_ints("beams");
  const int src_len = static_cast<int>(bench::int_or(options, "src-len", 28));
  const int out_len = static_cast<int>(bench::int_or(options, "out-len", 28));
  const int batches_per_case = static_cast<int>(options.get_int("batches-per-case"));
  const uint64_t seed = static_cast<uint64_t>(options.get_int("seed"));
  if (src_len < 2 || beams.empty()) fail("need --src-len >= 2 (eos included) and at least one beam size in --beams");
  const int max_batch = static_cast<int>(*std::max_element(batch_sizes.begin(), batch_sizes.end()));
  const int max_beam = static_cast<int>(*std::max_element(beams.begin(), beams.end()));
  // beam_search's length limit: floor(factor * source tokens without eos) = out_len exactly.
  const double length_factor = out_len > 0 ? (out_len + 0.5) / (src_len - 1) : 3.0;
  const int max_out = max_output_tokens(src_len - 1, length_factor);

  std::string model_name = model_dir.empty() ? "" : model_dir;
  // lstranslate's options (a model directory) or the preset's, with the benchmark's backend choice.
  Options model_options = default_options(App::translate);
  std::unique_ptr<bench::Preset> preset;
  if (model_dir.empty()) {
    preset = std::make_unique<bench::Preset>(bench::load_preset(preset_path, bench::vocab_sizes(options, 32000),
                                                                std::max({100, src_len, max_out + 1})));
    model_name = preset->name;
    model_options = preset->options;
  }
  for (char& ch : model_name)
    if (ch == ' ' || ch == '=') ch = '_';
  auto prefix_of = [&](int beam, int batch) {
    if (options.has("input")) {  // real sentences, free decoding
      return fmt::format("RESULT bench=decode impl=lseq model={} precision={} beam={} batch={} input=file graphs={}",
                         model_name, precision, beam, batch, graphs ? "on" : "off");
    }
    return fmt::format(
        "RESULT bench=decode impl=lseq model={} precision={} beam={} batch={} src_len={} out_len={} graphs={}",
        model_name, precision, beam, batch, src_len, out_len > 0 ? std::to_string(out_len) : "free",
        graphs ? "on" : "off");
  };
  auto all_cases = [&](const char* status, const std::string& reason) {
    for (int64_t beam : beams)
      for (int64_t batch : batch_sizes) print_status(prefix_of(int(beam), int(batch)), status, reason);
  };

  // Everything the decoder needs lives here, in destruction order (the decoder before the model and backend).
  std::unique_ptr<kernels::Backend> backend;
  std::unique_ptr<EncoderDecoderModel> model;
  std::unique_ptr<StepModel> decoder;
  std::unique_ptr<bench::DeviceMemoryProbe> memory;
  std::string planned = "na";
  try {
    if (preset) {
      memory = std::make_unique<bench::DeviceMemoryProbe>(!cpu, bench::device(options));
      backend = bench::make_backend(model_options, options, precision);
      backend->set_matmul_row_class_growth(decoding_row_class_growth(false));  // as lstranslate's
      model = std::make_unique<EncoderDecoderModel>(preset->config, *backend, precision_dtype(model_options),
                                                    ParamUse::inference);  // as lstranslate loads it
      model->init_params(seed);
      auto d =
          std::make_unique<EncoderDecoderStepModel>(*model, max_batch * max_beam, src_len, max_out + 1, max_batch);
      planned = bench::mib(d->state_bytes() + d->scratch_bytes());
      decoder = std::move(d);
      fmt::print("# backend {}; preset {} with random weights: dim {}, {}+{} layers, vocab {}; decoder state+scratch "
                 "{} MiB\n",
                 backend->name(), preset_path, preset->config.dim_emb, preset->config.enc_depth,
                 preset->config.dec_depth, preset->config.tgt_vocab, planned);
    } else {
      model_options.set("model", YAML::Node(model_dir));
      bench::set_backend_options(model_options, options, precision);
      model_options.set("beam-size", YAML::Node(max_beam));
      model_options.set("mini-batch", YAML::Node(max_batch));
      model_options.set("mini-batch-words", YAML::Node(max_batch));
      // Random sources of --src-len tokens; or, with --input, the lines lstranslate would accept.
      const bool real_input = options.has("input");
      model_options.set("max-length",
                        YAML::Node(real_input ? decoder_max_length(find_model_files(model_dir)) : src_len - 1));
      model_options.set("max-length-factor", YAML::Node(real_input ? 3.0 : length_factor));
      memory = std::make_unique<bench::DeviceMemoryProbe>(!cpu, bench::device(options));
      decoder = load_step_model(find_model_files(model_dir), model_options);
      fmt::print("# model {}\n", model_dir);
    }
  } catch (const Error& e) {
    all_cases("not-measured", e.what());
    return 0;
  }
  // --no-graphs: every step op by op, to measure what recording the steps (CUDA graphs) gains.
  if (auto* transformer = dynamic_cast<EncoderDecoderStepModel*>(decoder.get()))
    transformer->use_graphs(graphs);
  ForcedLengthDecoder forced(*decoder, out_len);
  StepModel& search_over = out_len > 0 ? static_cast<StepModel&>(forced) : *decoder;

  if (options.has("input")) {
    if (model_dir.empty()) fail("--input needs --model DIR: the lines are encoded with the model's vocabulary");
    for (int64_t beam : beams)
      for (int64_t batch : batch_sizes) run_real_input(options, model_dir, *decoder, int(beam), int(batch), prefix_of);
    return 0;
  }

  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(4, decoder->vocab_size() - 1);
  auto make_sources = [&](int sentences) {
    std::vector<std::vector<int32_t>> sources(sentences, std::vector<int32_t>(src_len - 1));
    for (auto& s : sources)
      for (auto& x : s) x = id(rng);
    return data::make_source_batch(sources, {});  // appends eos: src_len tokens each
  };

  for (int64_t beam : beams) {
    for (int64_t batch : batch_sizes) {
      const std::string prefix = prefix_of(int(beam), int(batch));
      try {
        BeamSearchOptions o;
        o.beam_size = static_cast<int>(beam);
        o.max_length_factor = length_factor;
        beam_search(search_over, make_sources(int(batch)), o);  // warm-up
        if (memory) memory->sample();
        std::vector<data::Batch> inputs;
        for (int i = 0; i < batches_per_case; ++i) inputs.push_back(make_sources(int(batch)));
        int64_t tokens = 0, sentences = 0;
        bool all_forced = true;
        forced.start_seconds = forced.step_seconds = forced.select_seconds = 0;
        const auto begin = std::chrono::steady_clock::now();
        for (const data::Batch& input : inputs) {
          for (const NBestList& list : beam_search(search_over, input, o)) {
            ++sentences;
            if (list.empty()) {
              all_forced = false;
              continue;
            }
            // Target tokens: the output's tokens, eos not counted (as lstranslate's summary and HF's peer count).
            tokens += static_cast<int64_t>(list[0].tokens.size());
            if (out_len > 0 && static_cast<int>(list[0].tokens.size()) != out_len) all_forced = false;
          }
        }
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        if (memory) memory->sample();
        if (!all_forced) {
          print_status(prefix, "failed", "an output does not have exactly --out-len tokens (forcing failed)");
          continue;
        }
        const double per_batch = 1e3 / batches_per_case;
        fmt::print("{} sentences={} sent_s={:.1f} tgt_tok_s={:.0f} ms_batch={:.2f} ms_start={:.2f} ms_steps={:.2f} "
                   "ms_select={:.2f} "
                   "peak_mem_mib={} planned_mib={} status=ok\n",
                   prefix, sentences, sentences / seconds, tokens / seconds, seconds * per_batch,
                   forced.start_seconds * per_batch, forced.step_seconds * per_batch, forced.select_seconds * per_batch,
                   memory && memory->valid() ? bench::mib(memory->peak_bytes()) : std::string("na"), planned);
        std::fflush(stdout);
      } catch (const Error& e) {
        print_status(prefix, "failed", e.what());
      }
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return lseq::app_main(lseq::App::bench, argc, argv, run); }
