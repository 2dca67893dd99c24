#include "core/search/sampling.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <thread>

#include "data/vocab.h"
#include "kernels/topk_draw.h"
#include "util/error.h"
#include "util/splitmix64.h"

namespace lseq {

namespace {

// The random stream of one input line: the same draws for a line whatever its batch or position in it.
uint64_t line_stream_state(uint64_t seed, uint64_t line) {
  return splitmix64_finalize(seed + kSplitMix64Increment * (line + 1));
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

// One thread's candidates of a row: ids and their log-probabilities.
struct RowScratch {
  std::vector<int32_t> kept;
  std::vector<float> kept_lp;
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
void draw_row(const RowDraws& d, const SamplingOptions& options, size_t h, bool may_continue, uint64_t& stream,
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
  auto by_log_prob = [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); };
  if (d.by_step_topk) {
    // The k best words merged with eos: the k best of everything search may produce, as the host ranking below
    // orders it (kernels/topk_draw.h, the same candidates Backend::draw_topk draws from).
    const size_t at = h * static_cast<size_t>(options.top_k);
    kept.resize(static_cast<size_t>(options.top_k));
    kept_lp.resize(static_cast<size_t>(options.top_k));
    const int n = kernels::topk_candidates(d.top_values.data() + at, d.top_ids.data() + at, eos_log_prob, eos,
                                           options.top_k, kept.data(), kept_lp.data());
    kept.resize(static_cast<size_t>(n));
    kept_lp.resize(static_cast<size_t>(n));
  } else {
    for (int32_t v = 0; v < d.vocab; ++v)
      if (!is_blocked_output(v) && kernels::drawable(row[v])) kept.push_back(v);
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
  const int chosen = kernels::draw_weighted(kept_lp.data(), static_cast<int>(kept_lp.size()), options.temperature,
                                            kernels::next_uniform(stream));
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

namespace {

// What both sampling loops share: the options, each sentence's hypothesis and result, and how a sentence ends.
struct Samples {
  const SamplingOptions& options;
  const SentenceSink& done;
  std::vector<Hypothesis> hyps;
  std::vector<NBestList> results;

  // A sentence is finished at the step that draws its eos: its list is final then.
  void finish(int s) {
    Hypothesis& h = hyps[s];
    for (float lp : h.word_log_probs) h.log_prob += lp;
    h.score = final_score(h.log_prob, static_cast<int>(h.tokens.size()), options.normalize, options.word_penalty);
    results[s].push_back(std::move(h));
    if (done) done(s, results[s]);
  }
};

// Each step waits for its draws, which the host makes from the step's top-k (or whole rows), before the next step.
void sample_on_host(StepModel& model, Samples& run, std::vector<uint64_t>& streams, const std::vector<int>& limit,
                    const TokenSink& sink) {
  const SamplingOptions& options = run.options;
  const int sentences = static_cast<int>(limit.size());
  const int32_t eos = data::kEosId;
  std::vector<int> live(sentences), next_live;
  for (int s = 0; s < sentences; ++s) live[s] = s;
  std::vector<int32_t> tokens(sentences, data::kBosId), next_tokens, parents;
  RowDraws draws;
  draws.by_step_topk = options.mode == SamplingOptions::Mode::top_k && options.top_k <= options.step_topk_limit;
  draws.vocab = model.vocab_size();
  // Ranking whole rows of a large vocabulary on the host is the slow part of a step (GPT-2: ~0.75 ms a row): rows
  // are independent (each line has its own random stream), so they are drawn on several threads.
  const int threads = draws.by_step_topk ? 1 : host_threads(options, draws.vocab);
  std::vector<RowScratch> scratch(static_cast<size_t>(threads));
  std::vector<int32_t> chosen;
  std::vector<float> chosen_log_prob;

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
        const bool may_continue = static_cast<int>(run.hyps[s].tokens.size()) < limit[s];
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
      Hypothesis& hyp = run.hyps[s];
      const int32_t token = chosen[h];
      hyp.word_log_probs.push_back(chosen_log_prob[h]);
      if (sink) sink(s, token);
      if (token == eos) {
        run.finish(s);
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
}

// Top-k sampling whose draws run where the steps do (StepModel::can_draw): step t + 1 is queued before step t's
// draws are read, so that a GPU does not wait for the host between steps. The same draws, scores and callbacks as
// sample_on_host, in the same order; only the reading lags: a row that drew eos at step t has already been fed to
// step t + 1 (whose draw for it is ignored) and leaves before step t + 2, and a row with no token left (its next
// draw is eos) leaves before the next step is queued, so that no step runs a row past its limit.
void sample_queued(StepModel& model, Samples& run, const std::vector<uint64_t>& streams, const std::vector<int>& limit,
                   const TokenSink& sink) {
  const int sentences = static_cast<int>(limit.size());
  std::vector<int32_t> left(limit.begin(), limit.end());  // tokens each sentence may still draw, as read so far
  model.begin_draws(streams, left, run.options.top_k, run.options.temperature);
  std::vector<int> live(sentences), kept;  // live: the model's hypotheses now, by sentence
  for (int s = 0; s < sentences; ++s) live[s] = s;
  std::vector<char> finished(sentences, 0);
  std::vector<int32_t> tokens, parents;
  std::vector<float> log_probs;
  // Keeps the live rows of the sentences for which keep(s) holds.
  auto keep_rows = [&](auto keep) {
    kept.clear();
    parents.clear();
    for (size_t h = 0; h < live.size(); ++h)
      if (keep(live[h])) kept.push_back(live[h]), parents.push_back(static_cast<int32_t>(h));
    if (keeps_all(parents, static_cast<int>(live.size()))) return;
    if (!kept.empty()) model.select(parents, kept);
    live.swap(kept);
  };
  std::deque<std::vector<int>> queued;  // the rows of each queued step not read yet, oldest first
  const std::vector<int32_t> first(sentences, data::kBosId);
  model.queue_drawn_step(&first);
  queued.push_back(live);
  while (true) {
    keep_rows([&](int s) { return left[s] > 0; });
    if (!live.empty()) {
      model.queue_drawn_step(nullptr);
      queued.push_back(live);
    }
    if (queued.empty()) break;
    model.take_draws(tokens, log_probs);
    const std::vector<int> rows = std::move(queued.front());
    queued.pop_front();
    for (size_t h = 0; h < rows.size(); ++h) {
      const int s = rows[h];
      if (finished[s]) continue;
      Hypothesis& hyp = run.hyps[s];
      hyp.word_log_probs.push_back(log_probs[h]);
      if (sink) sink(s, tokens[h]);
      if (tokens[h] == data::kEosId) {
        finished[s] = 1;
        run.finish(s);
        continue;
      }
      hyp.tokens.push_back(tokens[h]);
      --left[s];
    }
    keep_rows([&](int s) { return !finished[s]; });
  }
}

}  // namespace

std::vector<NBestList> sample(StepModel& model, const data::Batch& batch, const SamplingOptions& options,
                              const TokenSink& sink, const SentenceSink& done) {
  if (!(options.temperature > 0)) fail("--output-sampling: the temperature must be > 0");
  const int sentences = batch.size;
  if (sentences == 0) return {};
  model.start(batch.src, batch.src_lengths, sentences, batch.src_len);
  Samples run{options, done, std::vector<Hypothesis>(sentences), std::vector<NBestList>(sentences)};
  std::vector<uint64_t> streams;
  std::vector<int> limit(sentences);
  for (int s = 0; s < sentences; ++s) {
    uint64_t line = batch.line_ids.empty() ? static_cast<uint64_t>(s) : static_cast<uint64_t>(batch.line_ids[s]);
    streams.push_back(line_stream_state(options.seed, line));
    limit[s] = output_limit(source_tokens_without_eos(batch, s), options.max_length_factor, options.max_new_tokens,
                            options.max_context);
  }
  const bool by_step_topk = options.mode == SamplingOptions::Mode::top_k && options.top_k <= options.step_topk_limit;
  if (by_step_topk && options.queue_steps && model.can_draw())
    sample_queued(model, run, streams, limit, sink);
  else
    sample_on_host(model, run, streams, limit, sink);
  return std::move(run.results);  // every sentence drew its eos (it is forced at the length limit)
}

}  // namespace lseq
