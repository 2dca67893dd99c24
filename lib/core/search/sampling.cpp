#include "core/search/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

#include "data/vocab.h"
#include "util/error.h"
#include "util/splitmix64.h"

namespace lseq {

namespace {

// The random stream of one input line: the same draws for a line whatever its batch or position in it.
SplitMix64 line_stream(uint64_t seed, uint64_t line) {
  return SplitMix64(splitmix64_finalize(seed + kSplitMix64Increment * (line + 1)));
}

bool parse_number(const std::string& word, double* value) {
  try {
    size_t used = 0;
    double v = std::stod(word, &used);
    if (used != word.size() || !std::isfinite(v)) return false;
    *value = v;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// What one step gives the draws: whole rows of log-probabilities, or step_topk's k best and eos per row.
struct RowDraws {
  bool by_step_topk = false;
  int vocab = 0;
  std::vector<float> log_probs, top_values, eos_log_probs;
  std::vector<int32_t> top_ids;
};

// One thread's candidates of a row: ids, their log-probabilities, their unnormalised tempered probabilities.
struct RowScratch {
  std::vector<int32_t> kept;
  std::vector<float> kept_lp;
  std::vector<double> weights;
};

constexpr size_t kRowsPerThread = 4;  // fewer rows than this a thread are not worth one

// Threads for ranking whole rows on the host: one for small vocabularies (the ranking is cheap), else up to the
// machine's cores (at most 16); SamplingOptions::host_threads overrides.
int host_threads(const SamplingOptions& options, int vocab) {
  if (options.host_threads > 0) return options.host_threads;
  if (vocab < 4096) return 1;
  return static_cast<int>(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1u, 16u));
}

// Draws row h's next token (token, its log-probability): eos when the line may not continue or nothing can be
// drawn. Uses only row h, the line's stream and `mine`, so rows may be drawn on different threads.
void draw_row(const RowDraws& d, const SamplingOptions& options, size_t h, bool may_continue, SplitMix64& stream,
              RowScratch& mine, int32_t& token, float& token_log_prob) {
  const int32_t eos = data::kEosId;
  const float* row = d.by_step_topk ? nullptr : d.log_probs.data() + h * static_cast<size_t>(d.vocab);
  const float eos_log_prob = d.by_step_topk ? d.eos_log_probs[h] : row[eos];
  token = eos;
  token_log_prob = eos_log_prob;
  if (!may_continue) return;
  std::vector<int32_t>& kept = mine.kept;
  std::vector<float>& kept_lp = mine.kept_lp;
  kept.clear();
  kept_lp.clear();
  auto usable = [](float lp) { return !std::isnan(lp) && lp > -std::numeric_limits<float>::infinity(); };
  auto by_log_prob = [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); };
  if (d.by_step_topk) {
    // The k best words (best first, equal values by id) merged with eos, which precedes any word of its value (the
    // lower id): the k best of everything search may produce, as the host ranking below orders it.
    const float* values = d.top_values.data() + h * static_cast<size_t>(options.top_k);
    const int32_t* ids = d.top_ids.data() + h * static_cast<size_t>(options.top_k);
    bool eos_placed = !usable(eos_log_prob);
    for (int i = 0; i < options.top_k && static_cast<int>(kept.size()) < options.top_k; ++i) {
      if (!eos_placed && eos_log_prob >= values[i]) {
        kept.push_back(eos), kept_lp.push_back(eos_log_prob), eos_placed = true;
        if (static_cast<int>(kept.size()) == options.top_k) break;
      }
      if (ids[i] < 0 || !usable(values[i])) break;
      kept.push_back(ids[i]), kept_lp.push_back(values[i]);
    }
    if (!eos_placed && static_cast<int>(kept.size()) < options.top_k) {
      kept.push_back(eos);
      kept_lp.push_back(eos_log_prob);
    }
  } else {
    for (int32_t v = 0; v < d.vocab; ++v)
      if (!is_blocked_output(v) && usable(row[v])) kept.push_back(v);
    if (options.mode == SamplingOptions::Mode::top_k) {
      // Best first, as step_topk gives them, also when there are no more than k candidates.
      if (static_cast<int>(kept.size()) > options.top_k) {
        std::nth_element(kept.begin(), kept.begin() + options.top_k, kept.end(), by_log_prob);
        kept.resize(options.top_k);
      }
      std::sort(kept.begin(), kept.end(), by_log_prob);
    }
    if (options.mode == SamplingOptions::Mode::top_p && !kept.empty()) {
      // The nucleus: the smallest most-probable-first prefix holding top_p of the tempered mass. The order is
      // settled in growing chunks (the next chunk's tokens selected from the rest, then sorted), so a small
      // nucleus costs a pass over the vocabulary and a flat distribution about one sort of it.
      double best = -std::numeric_limits<double>::infinity();
      for (int32_t v : kept) best = std::max(best, static_cast<double>(row[v]));
      auto weight = [&](int32_t v) { return std::exp((row[v] - best) / options.temperature); };
      double total = 0;
      for (int32_t v : kept) total += weight(v);
      double mass = 0;
      size_t n = 0, sorted = 0;
      while (n == 0 && sorted < kept.size()) {
        const size_t next = std::min(kept.size(), std::max<size_t>(64, 2 * sorted));
        if (next < kept.size()) std::nth_element(kept.begin() + sorted, kept.begin() + next, kept.end(), by_log_prob);
        std::sort(kept.begin() + sorted, kept.begin() + next, by_log_prob);
        for (size_t k = sorted; k < next; ++k) {
          mass += weight(kept[k]);
          if (mass >= options.top_p * total) {
            n = k + 1;
            break;
          }
        }
        sorted = next;
      }
      kept.resize(n == 0 ? kept.size() : n);
    }
    for (int32_t v : kept) kept_lp.push_back(row[v]);
  }
  if (kept.empty()) return;
  // The draw: tempered probabilities relative to the best candidate, one uniform number of the line's stream.
  double best = -std::numeric_limits<double>::infinity();
  for (float lp : kept_lp) best = std::max(best, static_cast<double>(lp));
  mine.weights.clear();
  double total = 0;
  for (float lp : kept_lp) {
    mine.weights.push_back(std::exp((lp - best) / options.temperature));
    total += mine.weights.back();
  }
  const double target = stream.uniform() * total;
  double acc = 0;
  size_t chosen = kept.size() - 1;
  for (size_t k = 0; k < kept.size(); ++k) {
    acc += mine.weights[k];
    if (target < acc) {
      chosen = k;
      break;
    }
  }
  token = kept[chosen];
  token_log_prob = kept_lp[chosen];
}

}  // namespace

SamplingOptions parse_output_sampling(const std::vector<std::string>& words, SamplingOptions base) {
  SamplingOptions o = base;
  o.mode = SamplingOptions::Mode::full;
  o.top_k = 0;
  o.top_p = 1;
  o.temperature = 1;
  const std::string given = joined(words);
  auto bad = [&](const std::string& why) {
    fail("--output-sampling '{}': {}; use full, topk K or topp P, optionally followed by a temperature", given, why);
  };
  size_t i = 0;
  auto number = [&](const char* what) {
    double v = 0;
    if (i >= words.size() || !parse_number(words[i], &v)) bad(std::string("expected ") + what);
    ++i;
    return v;
  };
  if (words.empty()) bad("no mode given");
  if (words[0] == "full") {
    ++i;
  } else if (words[0] == "topk") {
    ++i;
    double k = number("the number of tokens K after topk");
    if (k < 1 || k != std::floor(k) || k > 1e9) bad("K must be a whole number >= 1");
    o.mode = SamplingOptions::Mode::top_k;
    o.top_k = static_cast<int>(k);
  } else if (words[0] == "topp") {
    ++i;
    double p = number("the probability mass P after topp");
    if (!(p > 0 && p <= 1)) bad("P must be in (0, 1]");
    o.mode = SamplingOptions::Mode::top_p;
    o.top_p = p;
  } else if (words[0] != "temperature") {
    bad("unknown mode '" + words[0] + "'");
  }
  if (i < words.size()) {
    if (words[i] == "temperature") ++i;
    o.temperature = number("a temperature");
    if (!(o.temperature > 0)) bad("the temperature must be > 0");
  }
  if (i < words.size()) bad("unexpected '" + words[i] + "'");
  return o;
}

std::vector<NBestList> sample(StepModel& model, const data::Batch& batch, const SamplingOptions& options,
                              const TokenSink& sink, const SentenceSink& done) {
  if (!(options.temperature > 0)) fail("--output-sampling: the temperature must be > 0");
  const int sentences = batch.size;
  std::vector<NBestList> results(sentences);
  if (sentences == 0) return results;
  model.start(batch.src, batch.src_lengths, sentences, batch.src_len);
  const int vocab = model.vocab_size();
  const int32_t eos = data::kEosId;

  std::vector<SplitMix64> streams;
  std::vector<int> limit(sentences);
  std::vector<Hypothesis> hyps(sentences);
  for (int s = 0; s < sentences; ++s) {
    uint64_t line = batch.line_ids.empty() ? static_cast<uint64_t>(s) : static_cast<uint64_t>(batch.line_ids[s]);
    streams.push_back(line_stream(options.seed, line));
    limit[s] = output_limit(source_tokens_without_eos(batch, s), options.max_length_factor, options.max_new_tokens,
                            options.max_context);
  }

  std::vector<int> live(sentences), next_live;
  for (int s = 0; s < sentences; ++s) live[s] = s;
  std::vector<int32_t> tokens(sentences, data::kBosId), next_tokens, parents;
  RowDraws draws;
  draws.by_step_topk = options.mode == SamplingOptions::Mode::top_k && options.top_k <= options.step_topk_limit;
  draws.vocab = vocab;
  // Ranking whole rows of a large vocabulary on the host is the slow part of a step (GPT-2: ~0.75 ms a row): rows
  // are independent (each line has its own random stream), so they are drawn on several threads.
  const int threads = draws.by_step_topk ? 1 : host_threads(options, vocab);
  std::vector<RowScratch> scratch(static_cast<size_t>(threads));
  std::vector<int32_t> chosen;
  std::vector<float> chosen_log_prob;
  // A sentence is finished at the step that draws its eos: its list is final then.
  auto finish = [&](int s) {
    Hypothesis& h = hyps[s];
    for (float lp : h.word_log_probs) h.log_prob += lp;
    h.score = final_score(h.log_prob, static_cast<int>(h.tokens.size()), options.normalize, options.word_penalty);
    results[s].push_back(std::move(h));
    if (done) done(s, results[s]);
  };

  while (!live.empty()) {
    if (draws.by_step_topk) {
      model.step_topk(tokens, options.top_k, draws.top_values, draws.top_ids, draws.eos_log_probs);
    } else {
      model.step(tokens, draws.log_probs);
    }
    const size_t rows = live.size();
    chosen.assign(rows, eos);
    chosen_log_prob.assign(rows, 0.0f);
    auto draw_rows = [&](size_t first, size_t last, RowScratch& mine) {
      for (size_t h = first; h < last; ++h) {
        const int s = live[h];
        const bool may_continue = static_cast<int>(hyps[s].tokens.size()) < limit[s];
        draw_row(draws, options, h, may_continue, streams[s], mine, chosen[h], chosen_log_prob[h]);
      }
    };
    const size_t used = std::min(static_cast<size_t>(threads), (rows + kRowsPerThread - 1) / kRowsPerThread);
    if (used <= 1) {
      draw_rows(0, rows, scratch[0]);
    } else {
      std::vector<std::thread> workers;
      const size_t per = (rows + used - 1) / used;
      for (size_t t = 1; t < used; ++t)
        workers.emplace_back(draw_rows, std::min(rows, t * per), std::min(rows, (t + 1) * per), std::ref(scratch[t]));
      draw_rows(0, std::min(rows, per), scratch[0]);
      for (std::thread& w : workers) w.join();
    }
    next_live.clear();
    next_tokens.clear();
    parents.clear();
    for (size_t h = 0; h < rows; ++h) {
      const int s = live[h];
      Hypothesis& hyp = hyps[s];
      const int32_t token = chosen[h];
      hyp.word_log_probs.push_back(chosen_log_prob[h]);
      if (sink) sink(s, token);
      if (token == eos) {
        finish(s);
        continue;
      }
      hyp.tokens.push_back(token);
      next_live.push_back(s);
      next_tokens.push_back(token);
      parents.push_back(static_cast<int32_t>(h));
    }
    if (next_live.empty()) break;
    if (!keeps_all(parents, static_cast<int>(live.size()))) model.select(parents, next_live);
    live.swap(next_live);
    tokens.swap(next_tokens);
  }

  return results;  // every sentence drew its eos (it is forced at the length limit)
}

}  // namespace lseq
