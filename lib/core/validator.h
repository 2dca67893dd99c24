#pragma once
// Validation on --valid-sets: cross-entropy (mean negative log-likelihood per target token, eos included, as
// Marian's ce-mean-words) and perplexity, computed without dropout. Translation-based metrics (bleu, chrf) need
// the decoder and are rejected with a clear message until it exists.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/transformer.h"
#include "data/corpus_cache.h"
#include "kernels/workspace.h"

namespace lseq {

class Validator {
 public:
  Validator(std::shared_ptr<const data::EncodedCorpus> corpus, std::vector<std::string> metrics,
            int64_t mini_batch_words, int mini_batch);

  const std::vector<std::string>& metrics() const { return metrics_; }
  static bool lower_is_better(const std::string& metric);
  static void check_metrics(const std::vector<std::string>& metrics);  // unknown/unsupported -> lseq::Error

  std::map<std::string, double> run(Transformer& model, kernels::Workspace& ws) const;

 private:
  std::shared_ptr<const data::EncodedCorpus> corpus_;
  std::vector<std::string> metrics_;
  int64_t mini_batch_words_;
  int mini_batch_;
};

}  // namespace lseq
