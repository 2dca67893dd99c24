#pragma once
// Validation on --valid-sets, without dropout:
//   cross-entropy (ce-mean-words): mean negative log-likelihood per target token, eos included, as Marian reports;
//   perplexity: exp(cross-entropy);
// (a language model: per predicted token of its lines, eos included, in lines or in blocks as it trains)
//   bleu, chrf: the validation source translated with the current weights (beam search with --beam-size,
//   --normalize, --word-penalty, --max-length-factor) and scored against the raw reference lines as sacreBLEU does;
//   translation: those translations written to a file that --valid-script-path gets as its last argument; the last
//   number the script prints is the value (higher is better, as in Marian);
//   valid-script: the last number --valid-script-path prints, run with its arguments only.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/model/model.h"
#include "core/search/beam_search.h"
#include "core/search/step_model.h"
#include "data/batcher.h"
#include "data/corpus_cache.h"
#include "data/vocab.h"
#include "kernels/workspace.h"

namespace lseq {

// What translation-based metrics need beyond the encoded corpus.
struct TranslationValidation {
  std::vector<std::string> references;  // raw target lines of the validation file, by line number
  const data::Vocab* target_vocab = nullptr;
  BeamSearchOptions beam;
  int mini_batch = 32;         // sentences decoded together
  std::string output_path;     // --valid-translation-output: one line per validation line (empty if skipped);
                               // {E} {B} {U} {T} become the epoch, batch, updates and target labels
  std::string script;          // --valid-script-path: a command run by /bin/sh
  std::vector<std::string> script_args;  // --valid-script-args, before the translation file
};

// Where training is when it validates: for the names of --valid-translation-output.
struct ValidationPoint {
  int64_t epoch = 0, batch = 0, updates = 0, labels = 0;
};

// --valid-translation-output's name with Marian's {E} {B} {U} {T} replaced.
std::string expand_output_template(const std::string& path, const ValidationPoint& point);
// Runs `command` through /bin/sh and returns the last number it printed (lseq::Error naming `option` when it fails
// or prints none).
double run_validation_script(const std::string& command, const std::string& option);

class Validator {
 public:
  // blocks: a language model's validation in blocks (--lm-pack-blocks: block_length and document_masks of
  // data::BatcherOptions), as it trains; the other fields are not used.
  Validator(std::shared_ptr<const data::EncodedCorpus> corpus, std::vector<std::string> metrics,
            int64_t mini_batch_words, int mini_batch, TranslationValidation translation = {},
            data::BatcherOptions blocks = {});
  ~Validator();

  const std::vector<std::string>& metrics() const { return metrics_; }
  static bool lower_is_better(const std::string& metric);
  static bool needs_translation(const std::string& metric);
  static void check_metrics(const std::vector<std::string>& metrics);  // unknown -> lseq::Error

  std::map<std::string, double> run(Model& model, kernels::Workspace& ws);
  void set_point(const ValidationPoint& point) { point_ = point; }

 private:
  double cross_entropy(Model& model, kernels::Workspace& ws) const;
  // Translations of the corpus's pairs, in pair order.
  std::vector<std::string> translate(Model& model);

  std::shared_ptr<const data::EncodedCorpus> corpus_;
  std::vector<std::string> metrics_;
  int64_t mini_batch_words_;
  int mini_batch_;
  TranslationValidation translation_;
  data::BatcherOptions blocks_;
  std::unique_ptr<StepModel> step_model_;  // made at the first translation, planned for the validation set
  ValidationPoint point_;
};

}  // namespace lseq
