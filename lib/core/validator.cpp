#include "core/validator.h"

#include <algorithm>
#include <cmath>

#include "data/batcher.h"
#include "util/error.h"

namespace lseq {

Validator::Validator(std::shared_ptr<const data::EncodedCorpus> corpus, std::vector<std::string> metrics,
                     int64_t mini_batch_words, int mini_batch)
    : corpus_(std::move(corpus)), metrics_(std::move(metrics)), mini_batch_words_(mini_batch_words),
      mini_batch_(mini_batch) {
  check_metrics(metrics_);
}

bool Validator::lower_is_better(const std::string& metric) {
  return metric == "cross-entropy" || metric == "perplexity" || metric == "ce-mean-words";
}

void Validator::check_metrics(const std::vector<std::string>& metrics) {
  for (const std::string& m : metrics) {
    if (m == "cross-entropy" || m == "perplexity" || m == "ce-mean-words") continue;
    if (m == "bleu" || m == "chrf" || m == "translation") {
      fail("--valid-metrics '{}' needs decoding during validation, which this version of lstrain does not have "
           "yet; use cross-entropy and/or perplexity",
           m);
    }
    fail("--valid-metrics: unknown metric '{}'; choose from cross-entropy, perplexity", m);
  }
}

std::map<std::string, double> Validator::run(Transformer& model, kernels::Workspace& ws) const {
  data::BatcherOptions options;
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
  const double ce = tokens > 0 ? nll / static_cast<double>(tokens) : 0.0;
  std::map<std::string, double> values;
  for (const std::string& m : metrics_) values[m] = m == "perplexity" ? std::exp(ce) : ce;
  return values;
}

}  // namespace lseq
