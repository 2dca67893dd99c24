#include "core/search/translator.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

#include "core/search/bounded_queue.h"
#include "core/search/nbest_format.h"
#include "core/search/stream_feed.h"
#include "data/ordered_output.h"
#include "util/error.h"

namespace lseq {

std::string ids_to_text(const std::vector<int32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
  return out;
}

namespace {

// Line breaks in a text become spaces: one input line, one output line. Returns whether there were any.
bool replace_line_breaks(std::string& text) {
  bool replaced = false;
  for (char& c : text) {
    if (c == '\n' || c == '\r') {
      c = ' ';
      replaced = true;
    }
  }
  return replaced;
}

std::string render(int64_t line, const NBestList& list, const Detokenizer& detokenize,
                   const TranslateSettings& settings, TranslationTotals& totals) {
  static const Hypothesis kEmpty;  // an empty translation with scores 0
  auto text_of = [&](const Hypothesis& h) {
    if (!detokenize) return ids_to_text(h.tokens);
    std::string text = detokenize(h.tokens);
    totals.line_breaks_replaced += replace_line_breaks(text) ? 1 : 0;
    return text;
  };
  if (!settings.n_best) {
    const Hypothesis& best = list.empty() ? kEmpty : list.front();
    return format_best(list.empty() ? std::string() : text_of(best), best, settings.word_scores);
  }
  if (list.empty()) return format_nbest_entry(line, "", kEmpty, settings.word_scores);
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) {
    if (i) out += '\n';
    out += format_nbest_entry(line, text_of(list[i]), list[i], settings.word_scores);
  }
  return out;
}

// Finished lines handed to the writer this many at a time (continuous searches finish them one by one).
constexpr size_t kLinesPerHandOver = 32;

constexpr size_t kWindowsAhead = 1;    // read and encoded windows waiting for the search (one more being read)
constexpr size_t kSearchedAhead = 128;  // hand-overs waiting for the writer (about one per batch)

}  // namespace

bool decodes_continuously(const std::vector<StepModel*>& models, const TranslateSettings& settings) {
  return settings.continuous && !settings.sample &&
         std::all_of(models.begin(), models.end(), [](const StepModel* m) { return m->can_admit(); });
}

TranslationTotals translate_all(StepModel& model, data::TranslationInput& input, const Detokenizer& detokenize,
                                const TranslateSettings& settings, std::ostream& out, double progress_seconds) {
  return translate_all(std::vector<StepModel*>{&model}, input, detokenize, settings, out, progress_seconds);
}

TranslationTotals translate_all(const std::vector<StepModel*>& models, data::TranslationInput& input,
                                const Detokenizer& detokenize, const TranslateSettings& settings, std::ostream& out,
                                double progress_seconds, const ExtraDecoders& extra) {
  if (models.empty()) fail("internal error: translate_all needs at least one decoder");
  using Clock = std::chrono::steady_clock;
  const Clock::time_point begin = Clock::now();
  auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  auto after = [](Clock::time_point t, double seconds) {
    return t + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };

  // Three threads, so that the CPU work overlaps the searches (on a GPU the search would otherwise wait for it):
  // the reader reads, encodes and batches the input windows (input.next, the only caller of the encoder); this
  // thread runs the searches (the only user of the model); the writer detokenizes, formats and writes the outputs
  // (the only user of `detokenize`, `output` and `out`). The bounded queues keep the memory bounded on any input.
  BoundedQueue<data::InputWindow> windows(kWindowsAhead);
  BoundedQueue<SearchedLines> searched(kSearchedAhead);
  std::exception_ptr read_error, search_error, write_error;
  data::OrderedOutput output(out);
  TranslationTotals totals;  // lines, target_tokens, line_breaks_replaced: the writer's while it runs
  double search_seconds = 0, input_wait_seconds = 0, output_wait_seconds = 0;
  std::vector<StepModel::RunCounts> extra_runs;  // the extra decoders'
  std::thread reader, writer;
  try {
    reader = std::thread([&] {
      try {
        data::InputWindow window;
        while (input.next(window) && windows.push(std::move(window))) {
        }
      } catch (...) {
        read_error = std::current_exception();
      }
      windows.close();
    });
    writer = std::thread([&] {
      try {
        Clock::time_point next_report = after(begin, progress_seconds);
        SearchedLines s;
        while (searched.pop(s)) {
          for (size_t i = 0; i < s.line_ids.size(); ++i) {
            if (!s.lists[i].empty()) totals.target_tokens += static_cast<int64_t>(s.lists[i].front().tokens.size());
            output.put(s.line_ids[i], render(s.line_ids[i], s.lists[i], detokenize, settings, totals));
          }
          if (s.window_end < 0) continue;
          totals.lines = std::max(totals.lines, s.window_end);
          const Clock::time_point now = Clock::now();
          if (progress_seconds > 0 && now >= next_report) {
            const double seconds = std::chrono::duration<double>(now - begin).count();
            spdlog::info("translated {} lines: {:.1f} lines/s, {:.0f} target tokens/s", totals.lines,
                         totals.lines / seconds, totals.target_tokens / seconds);
            next_report = after(now, progress_seconds);
          }
        }
      } catch (...) {
        write_error = std::current_exception();
        searched.cancel();  // the search stops at its next hand-over
        windows.cancel();   // ... or at once if it waits for input
      }
    });

    std::mutex wait_mutex;  // output_wait_seconds, from every decoding thread
    auto hand_over = [&](SearchedLines s) {  // false: the writer failed
      const Clock::time_point t = Clock::now();
      const bool ok = searched.push(std::move(s));
      const double waited = seconds_since(t);
      std::lock_guard<std::mutex> lock(wait_mutex);
      output_wait_seconds += waited;
      return ok;
    };
    const bool continuous = decodes_continuously(models, settings);
    // Continuous batching: every decoder runs one continuous search over the whole input (StreamFeed: window after
    // window, without draining at their ends), handing finished lines to the writer kLinesPerHandOver at a time.
    // An error stops the feed (the other decoders finish what they hold) and is rethrown: the first decoder's.
    // Returns the seconds decoders waited for input.
    auto search_stream = [&] {
      StreamFeed feed(windows, hand_over);
      // Each decoder's error slot: models' first, then the extra decoders' (made below).
      std::vector<std::exception_ptr> errors(models.size() + static_cast<std::size_t>(std::max(0, extra.count)));
      std::function<void()> join_extra_if_long;  // set below; called from every decoding thread
      auto decode = [&](StepModel& model, std::exception_ptr& error) {
        try {
          SearchedLines pending;
          bool writing = true;
          auto flush = [&] {
            if (!pending.line_ids.empty() && writing) writing = feed.hand_over(std::move(pending));
            pending = SearchedLines{};
          };
          const SentenceFeed next = [&](int max_sentences, const std::function<bool(int)>& fits, data::Batch& chunk) {
            const bool got = feed.next(max_sentences, fits, chunk);
            join_extra_if_long();
            return got;
          };
          beam_search_continuous(model, next, settings.beam, [&](int64_t line, const NBestList& list) {
            pending.line_ids.push_back(line);
            pending.lists.push_back(list);
            if (pending.line_ids.size() >= kLinesPerHandOver) flush();
          });
          flush();
        } catch (...) {
          error = std::current_exception();
          feed.stop();
        }
      };
      // The extra decoders: made and started, each on a thread of its own, by the first decoding thread that finds
      // the windows taken so far holding extra.after_batches batches.
      std::mutex extra_mutex;  // extra_threads, while they are started
      std::atomic<bool> extra_joined{false};
      std::vector<std::unique_ptr<StepModel>> extra_models(errors.size() - models.size());
      std::vector<std::thread> extra_threads;
      auto decode_extra = [&](std::size_t e) {
        try {
          extra_models[e] = extra.make();
        } catch (const std::exception& ex) {
          spdlog::warn("a further decoder could not be made ({}); the others go on", ex.what());
          return;
        } catch (...) {
          spdlog::warn("a further decoder could not be made (unknown error); the others go on");
          return;
        }
        decode(*extra_models[e], errors[models.size() + e]);
      };
      join_extra_if_long = [&] {
        if (extra_joined || extra_models.empty() || !extra.make || feed.batches_attached() < extra.after_batches)
          return;
        std::lock_guard<std::mutex> lock(extra_mutex);
        if (extra_joined) return;
        extra_joined = true;
        spdlog::info("the input holds at least {} batches: {} more decoders join the {} (--decoders sets a count)",
                     feed.batches_attached(), extra_models.size(), models.size());
        try {
          for (std::size_t e = 0; e < extra_models.size(); ++e) extra_threads.emplace_back(decode_extra, e);
        } catch (const std::exception& ex) {  // no thread to be had: the decoders running go on
          spdlog::warn("{} of {} further decoders started ({})", extra_threads.size(), extra_models.size(), ex.what());
        }
      };
      auto join_all_extra = [&] {
        {
          std::lock_guard<std::mutex> lock(extra_mutex);
          extra_joined = true;  // none starts after this
        }
        for (std::thread& thread : extra_threads) thread.join();
        for (const auto& model : extra_models)
          if (model) extra_runs.push_back(model->run_counts());
      };
      std::vector<std::thread> helpers;
      try {
        for (size_t m = 1; m < models.size(); ++m)
          helpers.emplace_back(decode, std::ref(*models[m]), std::ref(errors[m]));
      } catch (...) {
        feed.stop();
        for (std::thread& helper : helpers) helper.join();
        join_all_extra();
        throw;
      }
      decode(*models[0], errors[0]);
      for (std::thread& helper : helpers) helper.join();
      join_all_extra();
      for (const std::exception_ptr& error : errors)
        if (error) std::rethrow_exception(error);
      return feed.input_wait_seconds();
    };
    // Otherwise a window's batches, each to the next free decoder; false once the writer failed. An error stops the
    // other decoders after their current batch and is rethrown: the one of the earliest batch, as the serial loop
    // meets.
    auto search_window = [&](std::vector<data::Batch>& batches) {
      std::atomic<size_t> next{0};
      std::atomic<bool> go_on{true};
      std::vector<std::exception_ptr> errors(batches.size());
      auto decode = [&](StepModel& model) {
        for (size_t b; go_on && (b = next++) < batches.size();) {
          try {
            data::Batch& batch = batches[b];
            std::vector<NBestList> lists =
                settings.sample ? sample(model, batch, settings.sampling) : beam_search(model, batch, settings.beam);
            if (!hand_over({std::move(batch.line_ids), std::move(lists)})) go_on = false;
          } catch (...) {
            errors[b] = std::current_exception();
            go_on = false;
          }
        }
      };
      std::vector<std::thread> helpers;
      try {
        for (size_t m = 1; m < models.size() && m < batches.size(); ++m)
          helpers.emplace_back(decode, std::ref(*models[m]));
      } catch (...) {  // no thread to be had: the ones started finish their batch and stop
        go_on = false;
        for (std::thread& helper : helpers) helper.join();
        throw;
      }
      decode(*models[0]);
      for (std::thread& helper : helpers) helper.join();
      for (const std::exception_ptr& error : errors)
        if (error) std::rethrow_exception(error);
      return go_on.load();
    };
    if (continuous) {
      const Clock::time_point start = Clock::now();
      input_wait_seconds = search_stream();
      search_seconds = seconds_since(start) - input_wait_seconds;
    } else {
      data::InputWindow window;
      for (bool writing = true; writing;) {
        const Clock::time_point t = Clock::now();
        const bool got = windows.pop(window);
        input_wait_seconds += seconds_since(t);
        if (!got) break;
        const size_t empty = window.empty_lines.size();
        writing = hand_over({std::move(window.empty_lines), std::vector<NBestList>(empty)});
        if (writing) {
          const Clock::time_point start = Clock::now();
          writing = search_window(window.batches);
          search_seconds += seconds_since(start);
        }
        writing = writing && hand_over({{}, {}, window.end_line});
      }
    }
  } catch (...) {
    search_error = std::current_exception();
  }
  windows.cancel();  // the reader stops once it has read the window it is reading
  searched.close();  // the writer writes what was searched, then stops
  if (reader.joinable()) reader.join();
  if (writer.joinable()) writer.join();
  // The error the serial loop would have met first: the writer's is about a line searched before any search error,
  // and the reader runs ahead of the search.
  for (const std::exception_ptr& error : {write_error, search_error, read_error})
    if (error) std::rethrow_exception(error);
  output.finish(totals.lines);
  totals.search_seconds = search_seconds;
  totals.input_wait_seconds = input_wait_seconds;
  totals.output_wait_seconds = output_wait_seconds;
  totals.extra_decoder_runs = std::move(extra_runs);
  return totals;
}

}  // namespace lseq
