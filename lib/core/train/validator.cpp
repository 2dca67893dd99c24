#include "core/train/validator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>

#include "core/model/encoder_decoder_model.h"
#include "core/model/encoder_decoder_step_model.h"
#include "data/batcher.h"
#include "data/translation_input.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace lseq {

namespace {

std::string shell_quoted(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Marian runs the script path as given (it may hold its interpreter: "bash ./validate.sh"), then the arguments and
// the translation file.
std::string script_command(const TranslationValidation& t, const std::string& file) {
  if (t.script.empty()) fail("--valid-metrics translation and valid-script need --valid-script-path");
  std::string command = t.script;
  for (const std::string& arg : t.script_args) command += " " + shell_quoted(arg);
  if (!file.empty()) command += " " + shell_quoted(file);
  return command;
}

}  // namespace

std::string expand_output_template(const std::string& path, const ValidationPoint& point) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '{' && i + 2 < path.size() && path[i + 2] == '}') {
      const char key = path[i + 1];
      const int64_t value = key == 'E' ? point.epoch : key == 'B' ? point.batch : key == 'U' ? point.updates
                            : key == 'T' ? point.labels : -1;
      if (value >= 0) {
        out += std::to_string(value);
        i += 2;
        continue;
      }
    }
    out += path[i];
  }
  return out;
}

double run_validation_script(const std::string& command, const std::string& option) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) fail("{}: cannot run '{}'", option, command);
  std::string output;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = ::pclose(pipe);
  if (status != 0)
    fail("{} '{}' failed (exit status {}); it must print a score and exit 0", option, command,
         WIFEXITED(status) ? WEXITSTATUS(status) : status);
  // The last whitespace-separated word that is a number.
  std::istringstream words(output);
  bool found = false;
  double value = 0;
  for (std::string word; words >> word;) {
    char* end = nullptr;
    const double number = std::strtod(word.c_str(), &end);
    if (end != word.c_str() && *end == '\0' && std::isfinite(number)) value = number, found = true;
  }
  if (!found) fail("{} '{}' printed no number; it must print the score on its standard output", option, command);
  return value;
}

Validator::Validator(std::shared_ptr<const data::EncodedCorpus> corpus, std::vector<std::string> metrics,
                     int64_t mini_batch_words, int mini_batch, TranslationValidation translation,
                     data::BatcherOptions blocks)
    : corpus_(std::move(corpus)), metrics_(std::move(metrics)), mini_batch_words_(mini_batch_words),
      mini_batch_(mini_batch), translation_(std::move(translation)), blocks_(blocks) {
  check_metrics(metrics_);
  for (const std::string& m : metrics_) {
    if (needs_translation(m) && !translation_.target_vocab) fail("internal: metric {} without a target vocabulary", m);
  }
}

Validator::~Validator() = default;

bool Validator::lower_is_better(const std::string& metric) {
  return metric == "cross-entropy" || metric == "perplexity" || metric == "ce-mean-words";
}

bool Validator::needs_translation(const std::string& metric) {
  return metric == "bleu" || metric == "chrf" || metric == "translation";
}

void Validator::check_metrics(const std::vector<std::string>& metrics) {
  if (metrics.empty()) fail("--valid-metrics is empty; name at least one of cross-entropy, perplexity, bleu, chrf");
  for (const std::string& m : metrics) {
    if (m == "cross-entropy" || m == "perplexity" || m == "ce-mean-words" || m == "valid-script") continue;
    if (needs_translation(m)) continue;
    fail("--valid-metrics: unknown metric '{}'; choose from cross-entropy, perplexity, bleu, chrf", m);
  }
}

double Validator::cross_entropy(Model& model, kernels::Workspace& ws) const {
  data::BatcherOptions options;
  options.block_length = blocks_.block_length;
  options.document_masks = blocks_.document_masks;
  options.mini_batch_words = mini_batch_words_;
  options.mini_batch = mini_batch_;
  options.shuffle = false;
  options.prefetch = 0;
  data::Batcher batcher(corpus_, options);
  double nll = 0;
  int64_t tokens = 0;
  do {
    const data::Batch batch = batcher.next();
    const StepLoss loss = model.forward_loss(batch, ws);
    nll += loss.nll_sum;
    tokens += loss.target_tokens;
  } while (!batcher.epoch_finished());
  return tokens > 0 ? nll / static_cast<double>(tokens) : 0.0;
}

std::vector<std::string> Validator::translate(Model& any) {
  auto* translation_model = dynamic_cast<EncoderDecoderModel*>(&any);
  if (!translation_model) fail("--valid-metrics bleu and chrf translate, which needs an encoder-decoder model");
  EncoderDecoderModel& model = *translation_model;
  const int64_t n = corpus_->size();
  // Longest first, so batches have little padding; results go back to pair order.
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return corpus_->length(0, a) > corpus_->length(0, b); });
  const int batch_size = std::max(1, translation_.mini_batch);
  if (!step_model_) {
    const int max_src = static_cast<int>(corpus_->length(0, order.front())) + 1;
    const int max_tgt = max_output_tokens(max_src - 1, translation_.beam.max_length_factor) + 1;
    step_model_ = make_encoder_decoder_step_model(model, batch_size * translation_.beam.beam_size, max_src, max_tgt);
  }
  std::vector<std::string> translations(static_cast<std::size_t>(n));
  for (std::size_t begin = 0; begin < order.size(); begin += static_cast<std::size_t>(batch_size)) {
    const std::size_t end = std::min(order.size(), begin + static_cast<std::size_t>(batch_size));
    std::vector<std::vector<int32_t>> sentences;
    std::vector<int64_t> ids;
    for (std::size_t i = begin; i < end; ++i) {
      sentences.push_back(corpus_->tokens(0, order[i]));
      ids.push_back(order[i]);
    }
    const data::Batch batch = data::make_source_batch(sentences, ids);
    const std::vector<NBestList> results = beam_search(*step_model_, batch, translation_.beam);
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto& best = results[i].front();
      translations[static_cast<std::size_t>(ids[i])] = translation_.target_vocab->decode(best.tokens);
    }
  }
  return translations;
}

std::map<std::string, double> Validator::run(Model& model, kernels::Workspace& ws) {
  std::map<std::string, double> values;
  const auto is_ce = [](const std::string& m) { return !needs_translation(m) && m != "valid-script"; };
  const bool wants_ce = std::any_of(metrics_.begin(), metrics_.end(), is_ce);
  const bool wants_translation = std::any_of(metrics_.begin(), metrics_.end(), needs_translation);
  if (wants_ce) {
    const double ce = cross_entropy(model, ws);
    for (const std::string& m : metrics_) {
      if (is_ce(m)) values[m] = m == "perplexity" ? std::exp(ce) : ce;
    }
  }
  if (wants_translation) {
    const std::vector<std::string> hyps = translate(model);
    std::vector<std::string> refs;
    refs.reserve(hyps.size());
    for (int64_t i = 0; i < corpus_->size(); ++i) refs.push_back(translation_.references.at(corpus_->line(i)));
    for (const std::string& m : metrics_) {
      if (m == "bleu") values[m] = metrics::corpus_bleu(hyps, refs).score;
      if (m == "chrf") values[m] = metrics::corpus_chrf(hyps, refs).score;
    }
    const bool scripted = std::count(metrics_.begin(), metrics_.end(), "translation") > 0;
    std::string path = translation_.output_path.empty() ? "" : expand_output_template(translation_.output_path, point_);
    bool temporary = false;
    if (path.empty() && scripted) {
      path = (std::filesystem::temp_directory_path() / fmt::format("lseq-valid-{}.txt", ::getpid())).string();
      temporary = true;
    }
    if (!path.empty()) {
      // One line per line of the validation file; pairs the corpus skipped get an empty line.
      std::vector<std::string> lines(translation_.references.size());
      for (int64_t i = 0; i < corpus_->size(); ++i) lines[corpus_->line(i)] = hyps[static_cast<std::size_t>(i)];
      std::string text;
      for (const std::string& line : lines) text += line + "\n";
      write_file_atomic(path, text);
    }
    if (scripted) {
      try {
        values["translation"] = run_validation_script(script_command(translation_, path), "--valid-script-path");
      } catch (...) {
        if (temporary) std::filesystem::remove(path);
        throw;
      }
      if (temporary) std::filesystem::remove(path);
    }
  }
  if (std::count(metrics_.begin(), metrics_.end(), "valid-script") > 0)
    values["valid-script"] = run_validation_script(script_command(translation_, ""), "--valid-script-path");
  return values;
}

}  // namespace lseq
