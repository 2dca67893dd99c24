#include "core/search/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

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
                              const TokenSink& sink) {
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
  const bool by_step_topk =
      options.mode == SamplingOptions::Mode::top_k && options.top_k <= options.step_topk_limit;
  std::vector<float> log_probs, top_values, eos_log_probs;  // step(), or step_topk()'s values and eos
  std::vector<int32_t> top_ids;
  std::vector<int32_t> kept;     // candidate ids of one step
  std::vector<float> kept_lp;    // their log-probabilities
  std::vector<double> weights;   // their unnormalised tempered probabilities
  auto by_log_prob = [&](const float* row) {
    return [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); };
  };

  while (!live.empty()) {
    if (by_step_topk) {
      model.step_topk(tokens, options.top_k, top_values, top_ids, eos_log_probs);
    } else {
      model.step(tokens, log_probs);
    }
    next_live.clear();
    next_tokens.clear();
    parents.clear();
    for (size_t h = 0; h < live.size(); ++h) {
      const int s = live[h];
      Hypothesis& hyp = hyps[s];
      const float* row = by_step_topk ? nullptr : log_probs.data() + h * static_cast<size_t>(vocab);
      const float eos_log_prob = by_step_topk ? eos_log_probs[h] : row[eos];
      int32_t token = eos;
      float token_log_prob = eos_log_prob;
      if (static_cast<int>(hyp.tokens.size()) < limit[s]) {
        kept.clear();
        kept_lp.clear();
        auto usable = [](float lp) { return !std::isnan(lp) && lp > -std::numeric_limits<float>::infinity(); };
        if (by_step_topk) {
          // The k best words (best first, equal values by id) merged with eos, which precedes any word of its
          // value (the lower id): the k best of everything search may produce, as the host ranking below orders it.
          const float* values = top_values.data() + h * static_cast<size_t>(options.top_k);
          const int32_t* ids = top_ids.data() + h * static_cast<size_t>(options.top_k);
          bool eos_placed = !usable(eos_log_prob);
          for (int i = 0; i < options.top_k && static_cast<int>(kept.size()) < options.top_k; ++i) {
            if (!eos_placed && eos_log_prob >= values[i]) {
              kept.push_back(eos), kept_lp.push_back(eos_log_prob), eos_placed = true;
              if (static_cast<int>(kept.size()) == options.top_k) break;
            }
            if (ids[i] < 0 || !usable(values[i])) break;
            kept.push_back(ids[i]), kept_lp.push_back(values[i]);
          }
          if (!eos_placed && static_cast<int>(kept.size()) < options.top_k)
            kept.push_back(eos), kept_lp.push_back(eos_log_prob);
        } else {
          for (int32_t v = 0; v < vocab; ++v)
            if (!is_blocked_output(v) && usable(row[v])) kept.push_back(v);
          if (options.mode == SamplingOptions::Mode::top_k && static_cast<int>(kept.size()) > options.top_k) {
            std::nth_element(kept.begin(), kept.begin() + options.top_k, kept.end(), by_log_prob(row));
            kept.resize(options.top_k);
            std::sort(kept.begin(), kept.end(), by_log_prob(row));
          }
          if (options.mode == SamplingOptions::Mode::top_p && !kept.empty()) {
            // The nucleus: the smallest most-probable-first prefix holding top_p of the tempered mass. Sort only a
            // growing prefix (the nucleus is usually a small part of the vocabulary).
            double best = -std::numeric_limits<double>::infinity();
            for (int32_t v : kept) best = std::max(best, static_cast<double>(row[v]));
            auto weight = [&](int32_t v) { return std::exp((row[v] - best) / options.temperature); };
            double total = 0;
            for (int32_t v : kept) total += weight(v);
            size_t sorted = std::min<size_t>(64, kept.size());
            while (true) {
              std::partial_sort(kept.begin(), kept.begin() + sorted, kept.end(), by_log_prob(row));
              double mass = 0;
              for (size_t k = 0; k < sorted; ++k) mass += weight(kept[k]);
              if (mass >= options.top_p * total || sorted == kept.size()) break;
              sorted = std::min(kept.size(), sorted * 2);
            }
            double mass = 0;
            size_t n = 0;
            while (n < sorted) {
              mass += weight(kept[n++]);
              if (mass >= options.top_p * total) break;
            }
            kept.resize(n);
          }
          for (int32_t v : kept) kept_lp.push_back(row[v]);
        }
        // The draw: tempered probabilities relative to the best candidate, one uniform number of the line's stream.
        double best = -std::numeric_limits<double>::infinity();
        for (float lp : kept_lp) best = std::max(best, static_cast<double>(lp));
        weights.clear();
        double total = 0;
        for (float lp : kept_lp) {
          weights.push_back(std::exp((lp - best) / options.temperature));
          total += weights.back();
        }
        if (!kept.empty()) {
          const double target = streams[s].uniform() * total;
          double acc = 0;
          size_t chosen = kept.size() - 1;
          for (size_t k = 0; k < kept.size(); ++k) {
            acc += weights[k];
            if (target < acc) {
              chosen = k;
              break;
            }
          }
          token = kept[chosen];
          token_log_prob = kept_lp[chosen];
        }
      }
      hyp.word_log_probs.push_back(token_log_prob);
      if (sink) sink(s, token);
      if (token == eos) continue;
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

  for (int s = 0; s < sentences; ++s) {
    Hypothesis& h = hyps[s];
    for (float lp : h.word_log_probs) h.log_prob += lp;
    h.score = final_score(h.log_prob, static_cast<int>(h.tokens.size()), options.normalize, options.word_penalty);
    results[s].push_back(std::move(h));
  }
  return results;
}

}  // namespace lseq
