#include "core/search/scorer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "core/search/forced_scoring.h"
#include "core/search/nbest_format.h"
#include "core/search/search_types.h"
#include "data/ordered_output.h"
#include "util/error.h"

namespace lseq {

namespace {

struct Pair {
  int64_t index = 0;  // output position
  std::vector<int32_t> source, target;
  bool rejected = false;
  bool rescoring = false;   // an n-best entry: written back with the score added
  std::string nbest_entry;  // rescoring: the entry as read
};

// Reads pairs until the window is full; returns false when there were none.
using PairSource = std::function<bool(Pair&)>;

std::string render(const Pair& pair, const std::vector<float>* word_log_probs, const ScoreSettings& settings,
                   ScoreTotals& totals) {
  double score = std::numeric_limits<double>::quiet_NaN();
  if (word_log_probs) {
    double log_prob = sum_log_probs(*word_log_probs);
    totals.log_prob += log_prob;
    totals.target_tokens += static_cast<int64_t>(word_log_probs->size());
    ++totals.scored;
    score = settings.normalize > 0
                ? final_score(log_prob, static_cast<int>(pair.target.size()), settings.normalize, 0.0)
                : log_prob;
  }
  if (pair.rescoring) return add_nbest_feature(pair.nbest_entry, settings.n_best_feature, score);
  std::string line = std::isnan(score) ? "nan" : format_score(score);
  if (settings.word_scores && word_log_probs) line += " ||| " + format_word_scores(*word_log_probs);
  return line;
}

ScoreTotals score_all(StepModel& model, const PairSource& next_pair, const ScoreSettings& settings,
                      std::ostream& out) {
  const auto& b = settings.batching;
  if (b.mini_batch == 0 && b.mini_batch_words == 0)
    fail("--mini-batch and --mini-batch-words are both 0; set at least one of them");
  const int64_t window_pairs = b.mini_batch > 0 ? static_cast<int64_t>(b.mini_batch) * std::max(1, b.maxi_batch)
                                                : INT64_MAX;
  const int64_t window_tokens = b.mini_batch > 0 ? INT64_MAX : b.mini_batch_words * std::max(1, b.maxi_batch);
  ScoreTotals totals;
  data::OrderedOutput output(out);
  auto emit = [&](int64_t index, std::string text) {
    if (!settings.summary) output.put(index, std::move(text));
  };
  bool more = true;
  while (more) {
    std::vector<Pair> window;
    int64_t tokens = 0;
    Pair pair;
    while (static_cast<int64_t>(window.size()) < window_pairs && tokens < window_tokens && (more = next_pair(pair))) {
      ++totals.lines;
      if (pair.rejected) {
        emit(pair.index, render(pair, nullptr, settings, totals));
        continue;
      }
      tokens += static_cast<int64_t>(std::max(pair.source.size(), pair.target.size())) + 1;
      window.push_back(std::move(pair));
      pair = Pair();
    }
    // Longest targets first, so batches hold similar lengths; cut by sentences and padded tokens.
    std::stable_sort(window.begin(), window.end(), [](const Pair& x, const Pair& y) {
      return x.target.size() != y.target.size() ? x.target.size() > y.target.size() : x.source.size() > y.source.size();
    });
    for (size_t begin = 0; begin < window.size();) {
      size_t end = begin;
      int64_t longest = 0;
      while (end < window.size()) {
        int64_t length = static_cast<int64_t>(std::max(window[end].source.size(), window[end].target.size())) + 1;
        int64_t rows = static_cast<int64_t>(end - begin) + 1;
        bool too_many = b.mini_batch > 0 && rows > b.mini_batch;
        bool too_big = b.mini_batch_words > 0 && rows * std::max(longest, length) > b.mini_batch_words;
        if (end > begin && (too_many || too_big)) break;
        longest = std::max(longest, length);
        ++end;
      }
      std::vector<std::vector<int32_t>> sources, targets;
      std::vector<int64_t> ids;
      for (size_t i = begin; i < end; ++i) {
        sources.push_back(window[i].source);
        targets.push_back(window[i].target);
        ids.push_back(window[i].index);
      }
      data::Batch batch = data::make_source_batch(sources, ids);
      data::set_batch_targets(batch, targets);
      auto scores = forced_word_log_probs(model, batch);
      for (size_t i = begin; i < end; ++i) emit(window[i].index, render(window[i], &scores[i - begin], settings, totals));
      begin = end;
    }
  }
  if (!settings.summary) output.finish(totals.lines);
  return totals;
}

data::TranslationInputOptions scoring_options(const ScoreSettings& settings, int vocab_size) {
  data::TranslationInputOptions o = settings.batching;
  o.vocab_size = vocab_size;
  o.rejected_note = "writing nan as its score";
  return o;
}

}  // namespace

ScoreTotals score_pairs(StepModel& model, data::InputLineReader& source, data::InputLineReader& target,
                        const data::TextEncoder& encode_source, const data::TextEncoder& encode_target,
                        const ScoreSettings& settings, std::ostream& out) {
  const auto source_options = scoring_options(settings, settings.batching.vocab_size);
  const auto target_options = scoring_options(settings, settings.target_vocab_size);
  auto next_pair = [&](Pair& pair) {
    std::string src_line, tgt_line;
    bool has_source = source.next(src_line), has_target = target.next(tgt_line);
    if (has_source != has_target) {
      const data::InputLineReader& longer = has_source ? source : target;
      fail("{} has more lines than {} ({}); source and target files must have the same number of lines",
           longer.file(), (has_source ? target : source).file(), longer.where());
    }
    if (!has_source) return false;
    auto src = data::encode_input_line(src_line, source.where(), encode_source, source_options);
    auto tgt = data::encode_input_line(tgt_line, target.where(), encode_target, target_options);
    pair.index = source.index();
    pair.source = std::move(src.ids);
    pair.target = std::move(tgt.ids);
    pair.rejected = src.rejected || tgt.rejected;
    return true;
  };
  return score_all(model, next_pair, settings, out);
}

ScoreTotals score_lines(StepModel& model, data::InputLineReader& lines, const data::TextEncoder& encode,
                        const ScoreSettings& settings, std::ostream& out) {
  const auto options = scoring_options(settings, settings.target_vocab_size);
  auto next_pair = [&](Pair& pair) {
    std::string line;
    if (!lines.next(line)) return false;
    auto encoded = data::encode_input_line(line, lines.where(), encode, options);
    pair.index = lines.index();
    pair.target = std::move(encoded.ids);  // the source (prompt) stays empty
    pair.rejected = encoded.rejected;
    return true;
  };
  return score_all(model, next_pair, settings, out);
}

ScoreTotals rescore_nbest(StepModel& model, data::InputLineReader& source, data::InputLineReader& nbest,
                          const data::TextEncoder& encode_source, const data::TextEncoder& encode_target,
                          const ScoreSettings& settings, std::ostream& out) {
  const auto source_options = scoring_options(settings, settings.batching.vocab_size);
  const auto target_options = scoring_options(settings, settings.target_vocab_size);
  data::EncodedLine current;  // the source line source.index(), encoded
  int64_t entries = 0, unlisted = 0;
  auto next_pair = [&](Pair& pair) {
    std::string entry;
    if (!nbest.next(entry)) return false;
    pair.index = entries++;
    pair.rescoring = true;
    NBestEntry parsed;
    const std::string problem = parse_nbest_entry(entry, parsed);
    if (!problem.empty()) {  // one bad entry: its line is kept, the list goes on
      spdlog::warn("{}: {}; writing it back {}", nbest.where(), problem,
                   has_feature_field(entry) ? "with a score of nan" : "unchanged");
      pair.nbest_entry = std::move(entry);
      pair.rejected = true;
      return true;
    }
    // Entries out of order or past the source's end leave no entry after them with its source line: one error.
    if (parsed.line < source.index())
      fail("{}: an entry for source line {} comes after one for line {}; n-best entries must be in source order, "
           "as lstranslate --n-best writes them (sort a list with: sort -s -n -k1,1)",
           nbest.where(), parsed.line, source.index());
    if (parsed.line > source.index() + 1) {
      if (unlisted == 0)
        spdlog::warn("{}: an entry for source line {} follows one for line {}: source lines {} to {} have no entries",
                     nbest.where(), parsed.line, source.index(), source.index() + 1, parsed.line - 1);
      unlisted += parsed.line - (source.index() + 1);  // parenthesised: line may be INT64_MAX, index -1
    }
    std::string src_line;
    while (source.index() < parsed.line) {
      if (!source.next(src_line))
        fail("{}: names source line {} (counted from 0) but {} has only {} lines; is it the source of this list?",
             nbest.where(), parsed.line, source.file(), source.index() + 1);
      if (source.index() == parsed.line)
        current = data::encode_input_line(src_line, source.where(), encode_source, source_options);
    }
    auto tgt = data::encode_input_line(parsed.text, nbest.where(), encode_target, target_options);
    pair.source = current.ids;
    pair.target = std::move(tgt.ids);
    pair.rejected = current.rejected || tgt.rejected;
    pair.nbest_entry = std::move(entry);
    return true;
  };
  ScoreTotals totals = score_all(model, next_pair, settings, out);
  if (unlisted > 0) spdlog::warn("{} lines of {} have no n-best entries", unlisted, source.file());
  std::string rest;
  if (source.next(rest))
    spdlog::warn("{} has lines that no n-best entry names, from line {} (counted from 0) on; was {} cut short?",
                 source.file(), source.index(), nbest.file());
  return totals;
}

std::string format_summary(const ScoreTotals& totals) {
  double ce = totals.target_tokens > 0 ? -totals.log_prob / static_cast<double>(totals.target_tokens) : 0.0;
  return fmt::format("cross-entropy {:.4f} perplexity {:.4f} ({} target tokens with eos, {} sentences)", ce,
                     std::exp(ce), totals.target_tokens, totals.scored);
}

}  // namespace lseq
