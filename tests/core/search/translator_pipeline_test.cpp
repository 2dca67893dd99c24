// translate_all's three threads (reader, search, writer; translator.cpp): the output, the totals and the error are
// what the serial loop it replaced gives, with many windows flowing through the queues, whatever thread is slow or
// fails; the model is used from the calling thread only; no thread runs on after the call returns.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "captured_log.h"
#include "core/search/nbest_format.h"
#include "core/search/translator.h"
#include "data/ordered_output.h"
#include "data/translation_input.h"
#include "toy_step_model.h"
#include "util/error.h"

namespace lseq {
namespace {

using data::TranslationInputOptions;
using namespace std::chrono_literals;

// translate_all as it was before it had threads (read a window, search each batch, render), verbatim: the reference.
std::string serial_render(int64_t line, const NBestList& list, const Detokenizer& detokenize,
                          const TranslateSettings& settings, TranslationTotals& totals) {
  static const Hypothesis kEmpty;
  auto text_of = [&](const Hypothesis& h) {
    if (!detokenize) return ids_to_text(h.tokens);
    std::string text = detokenize(h.tokens);
    bool replaced = false;
    for (char& c : text)
      if (c == '\n' || c == '\r') c = ' ', replaced = true;
    totals.line_breaks_replaced += replaced ? 1 : 0;
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

TranslationTotals serial_translate_all(StepModel& model, data::TranslationInput& input, const Detokenizer& detokenize,
                                       const TranslateSettings& settings, std::ostream& out) {
  data::OrderedOutput output(out);
  data::InputWindow window;
  TranslationTotals totals;
  while (input.next(window)) {
    for (int64_t line : window.empty_lines) output.put(line, serial_render(line, {}, detokenize, settings, totals));
    for (const auto& batch : window.batches) {
      std::vector<NBestList> lists =
          settings.sample ? sample(model, batch, settings.sampling) : beam_search(model, batch, settings.beam);
      for (int i = 0; i < batch.size; ++i) {
        if (!lists[i].empty()) totals.target_tokens += static_cast<int64_t>(lists[i].front().tokens.size());
        output.put(batch.line_ids[i], serial_render(batch.line_ids[i], lists[i], detokenize, settings, totals));
      }
    }
    totals.lines = window.end_line;
  }
  output.finish(totals.lines);
  return totals;
}

// The toy model, with a hook called before each start() (with the number of earlier starts) and the threads that
// called it.
class HookedModel : public testing::ToyStepModel {
 public:
  HookedModel() : ToyStepModel(44, 3, -0.5) {}
  void start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override {
    threads.insert(std::this_thread::get_id());
    if (on_start) on_start(starts);
    ToyStepModel::start(src, src_lengths, sentences, src_len);
  }
  void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) override {
    threads.insert(std::this_thread::get_id());
    ToyStepModel::step(tokens, log_probs);
  }
  std::function<void(int)> on_start;
  std::set<std::thread::id> threads;
};

// A stand-in for SentencePiece (one id per word, from its bytes) that counts its calls and notes its threads; `hook`
// is called first with the number of earlier calls.
struct Encoder {
  std::function<void(int)> hook;
  std::atomic<int> calls{0};
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::vector<int32_t> operator()(std::string_view text) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
    }
    if (hook) hook(calls);
    ++calls;
    std::vector<int32_t> ids;
    std::istringstream words{std::string(text)};
    for (std::string w; words >> w;) {
      uint32_t h = 7;
      for (unsigned char c : w) h = h * 31 + c;
      ids.push_back(4 + static_cast<int32_t>(h % 40));
    }
    return ids;
  }
};

// A detokenizer like Encoder; with line_breaks, ids divisible by 7 decode to a line break first (a byte-level BPE's
// newline).
struct Decoder {
  bool line_breaks = false;
  std::function<void(int)> hook;
  std::atomic<int> calls{0};
  std::mutex mutex;
  std::set<std::thread::id> threads;
  std::string operator()(const std::vector<int32_t>& ids) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
    }
    if (hook) hook(calls);
    ++calls;
    std::string text = "<";
    for (int32_t id : ids) text += (line_breaks && id % 7 == 0 ? "\n" : "") + std::to_string(id) + " ";
    return text + ">";
  }
};

// Set once by one thread, awaited by another.
class Flag {
 public:
  void raise() {
    std::lock_guard<std::mutex> lock(mutex_);
    raised_ = true;
    changed_.notify_all();
  }
  bool wait(std::chrono::seconds timeout) {  // false: not raised within the timeout
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return raised_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool raised_ = false;
};

// Random input: words, empty lines, blank lines and invalid UTF-8 (both give an empty output without decoding).
std::string make_input(int lines, uint64_t seed) {
  std::mt19937 rng(seed);
  std::string text;
  for (int i = 0; i < lines; ++i) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind == 0) {
      text += "\n";
    } else if (kind == 1) {
      text += "  \n";
    } else if (kind == 2) {
      text += "ab \xff cd\n";
    } else {
      for (int w = 1 + static_cast<int>(rng() % 12); w > 0; --w)
        text += std::string(1 + rng() % 5, static_cast<char>('a' + rng() % 26)) + " ";
      text += "\n";
    }
  }
  return text;
}

// Runs f on another thread; a call still running after `seconds` (a deadlock) fails the test program at once rather
// than hanging it. Rethrows what f threw.
void within_deadline(const std::function<void()>& f, std::chrono::seconds seconds = 60s) {
  std::packaged_task<void()> task(f);
  std::future<void> done = task.get_future();
  std::thread thread(std::move(task));
  if (done.wait_for(seconds) != std::future_status::ready) {
    std::fprintf(stderr, "FATAL: translate_all did not return within %lld s (deadlock?)\n",
                 static_cast<long long>(seconds.count()));
    std::abort();
  }
  thread.join();
  done.get();
}

// One run of translate_all (or the serial reference) over `text`: its output, totals and error message.
struct Outcome {
  std::string out, error;
  TranslationTotals totals;
  std::set<std::thread::id> model_threads, encoder_threads, decoder_threads;
  std::thread::id caller;
  int starts = 0;  // batches searched
};

struct Case {
  TranslateSettings settings;
  TranslationInputOptions input;
  bool ids_input = false;    // no encoder: the input lines are ids
  bool ids_output = false;   // no detokenizer
  bool line_breaks = false;  // the detokenizer gives line breaks
  // Hooks for the model's starts, the encoder's and the detokenizer's calls (slow or failing steps).
  std::function<void(int)> on_start, on_encode, on_decode;
  std::string input_file;  // read this file instead of the text
};

Outcome run(const Case& c, const std::string& text, bool serial) {
  testing::CapturedLog log;  // the warnings about the input's bad lines
  Outcome r;
  HookedModel model;
  model.on_start = c.on_start;
  Encoder encoder;
  encoder.hook = c.on_encode;
  Decoder decoder;
  decoder.hook = c.on_decode;
  decoder.line_breaks = c.line_breaks;
  data::TextEncoder encode;
  if (!c.ids_input) encode = [&](std::string_view t) { return encoder(t); };
  Detokenizer detokenize;
  if (!c.ids_output) detokenize = [&](const std::vector<int32_t>& ids) { return decoder(ids); };
  std::istringstream in(text);
  std::optional<data::InputLineReader> reader;
  if (c.input_file.empty()) {
    reader.emplace(in, "in");
  } else {
    reader.emplace(std::vector<std::string>{c.input_file});
  }
  data::TranslationInput input(*reader, encode, c.input);
  std::ostringstream out;
  within_deadline([&] {
    r.caller = std::this_thread::get_id();
    try {
      r.totals = serial ? serial_translate_all(model, input, detokenize, c.settings, out)
                        : translate_all(model, input, detokenize, c.settings, out);
    } catch (const Error& e) {
      r.error = e.what();
    }
  });
  // No thread of the call runs on: nothing is encoded or detokenized after it returned.
  const int encoded = encoder.calls, decoded = decoder.calls;
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(encoder.calls.load(), encoded);
  EXPECT_EQ(decoder.calls.load(), decoded);
  r.starts = model.starts;
  r.out = out.str();
  r.model_threads = model.threads;
  r.encoder_threads = encoder.threads;
  r.decoder_threads = decoder.threads;
  return r;
}

// The pipeline against the serial loop: the same bytes, totals and error; the model only on the calling thread.
// Returns the pipeline's outcome (hooks that keep state see one serial run, then one pipeline run).
Outcome expect_as_serial(const Case& c, const std::string& text, const std::string& what) {
  SCOPED_TRACE(what);
  const Outcome want = run(c, text, true);
  const Outcome got = run(c, text, false);
  EXPECT_EQ(got.error, want.error);
  EXPECT_EQ(got.out, want.out);
  if (want.error.empty()) {
    EXPECT_EQ(got.totals.lines, want.totals.lines);
    EXPECT_EQ(got.totals.target_tokens, want.totals.target_tokens);
    EXPECT_EQ(got.totals.line_breaks_replaced, want.totals.line_breaks_replaced);
  }
  EXPECT_LE(got.model_threads.size(), 1u);
  EXPECT_EQ(got.model_threads.count(got.caller), got.model_threads.size()) << "the model is used from the caller only";
  EXPECT_LE(got.encoder_threads.size(), 1u);
  EXPECT_LE(got.decoder_threads.size(), 1u);
  EXPECT_EQ(got.encoder_threads.count(got.caller), 0u) << "the encoder runs on the reader thread";
  EXPECT_EQ(got.decoder_threads.count(got.caller), 0u) << "the detokenizer runs on the writer thread";
  return got;
}

TranslationInputOptions small_windows(int mini_batch, int maxi_batch, int64_t words = 0) {
  TranslationInputOptions o;
  o.mini_batch = mini_batch;
  o.maxi_batch = maxi_batch;
  o.mini_batch_words = words;
  o.max_length = 10;
  o.vocab_size = 44;
  return o;
}

std::vector<Case> settings_cases() {
  std::vector<Case> cases;
  Case best;  // beam search, ids out
  best.settings.beam.beam_size = 3;
  best.ids_output = true;
  cases.push_back(best);
  Case nbest;  // n-best with word scores, line breaks in the text
  nbest.settings.beam.beam_size = 2;
  nbest.settings.n_best = true;
  nbest.settings.word_scores = true;
  nbest.line_breaks = true;
  cases.push_back(nbest);
  Case sampled;  // sampling (its streams are seeded by the line numbers)
  sampled.settings.sample = true;
  sampled.settings.sampling = parse_output_sampling({"topk", "5"});
  sampled.settings.word_scores = true;
  sampled.line_breaks = true;
  cases.push_back(sampled);
  Case greedy;
  greedy.settings.beam.beam_size = 1;
  cases.push_back(greedy);
  return cases;
}

TEST(TranslatorPipeline, ManyWindowsGiveTheSerialOutputAndTotals) {
  const std::string text = make_input(150, 3);
  int index = 0;
  for (Case c : settings_cases()) {
    for (const TranslationInputOptions& o : {small_windows(2, 1), small_windows(3, 2), small_windows(0, 1, 12),
                                             small_windows(16, 100)}) {
      c.input = o;
      expect_as_serial(c, text, "case " + std::to_string(index) + ", mini-batch " + std::to_string(o.mini_batch) +
                                    ", maxi-batch " + std::to_string(o.maxi_batch));
    }
    ++index;
  }
}

TEST(TranslatorPipeline, IdsInputWithRejectedLines) {
  Case c;
  c.ids_input = true;
  c.ids_output = true;
  c.settings.beam.beam_size = 2;
  c.input = small_windows(2, 1);
  expect_as_serial(c, "5 6 7\n\n8 x 9\n 10 11 \n60\n12\n\n\n13 14 15 16\n", "ids");
  EXPECT_EQ(expect_as_serial(c, "", "no input").totals.lines, 0);
  EXPECT_EQ(expect_as_serial(c, "\n\n\n", "only empty lines").out, "\n\n\n");
}

// A slow reader (the search waits for input), a slow writer (the bounded queue to it fills up) and a slow search
// (the reader is held back by its bounded queue): the same output, and the time shows where it went.
TEST(TranslatorPipeline, SlowThreadsGiveTheSameOutputAndTheTimesShowWhere) {
  const std::string text = make_input(240, 8);
  Case c = settings_cases()[1];
  c.input = small_windows(2, 1);

  Case slow_reader = c;
  slow_reader.on_encode = [](int) { std::this_thread::sleep_for(3ms); };
  EXPECT_GT(expect_as_serial(slow_reader, text, "slow reader").totals.input_wait_seconds, 0.1)
      << "about 200 lines of 3 ms to encode (1 ms each left 0.099 s of waiting under the sanitizers)";

  Case slow_writer = c;
  slow_writer.on_decode = [](int) { std::this_thread::sleep_for(3ms); };
  EXPECT_GT(expect_as_serial(slow_writer, text, "slow writer").totals.output_wait_seconds, 0.1)
      << "about 300 outputs of 3 ms to detokenize; the queue holds 128 batches (1 ms each left 0.086 s of waiting "
         "under the sanitizers on a busy 2-core host)";

  Case slow_search = c;
  slow_search.on_start = [](int) { std::this_thread::sleep_for(2ms); };
  const Outcome r = expect_as_serial(slow_search, text, "slow search");
  EXPECT_GT(r.starts, 50);
  EXPECT_GE(r.totals.search_seconds, 0.002 * r.starts) << "each batch takes 2 ms or more";
  EXPECT_LT(r.totals.input_wait_seconds, r.totals.search_seconds);
}

// The CPU work overlaps the search: the reader encodes the next window while a batch is searched, and the writer
// detokenizes while the next batch is searched. The serial loop fails both (each wait would time out).
TEST(TranslatorPipeline, ReaderAndWriterRunBesideTheSearch) {
  std::mutex mutex;
  std::condition_variable changed;
  int encoded = 0, started = 0;
  bool reader_ahead = false, writer_behind = false;
  Case c;
  c.settings.beam.beam_size = 2;
  c.input = small_windows(2, 1);  // windows of 2 lines
  c.on_encode = [&](int) {
    std::lock_guard<std::mutex> lock(mutex);
    ++encoded;
    changed.notify_all();
  };
  c.on_start = [&](int starts) {
    std::unique_lock<std::mutex> lock(mutex);
    ++started;
    changed.notify_all();
    if (starts == 0) reader_ahead = changed.wait_for(lock, 5s, [&] { return encoded >= 3; });
  };
  c.on_decode = [&](int calls) {
    std::unique_lock<std::mutex> lock(mutex);
    if (calls == 0) writer_behind = changed.wait_for(lock, 5s, [&] { return started >= 2; });
  };
  const Outcome r = run(c, "a b c\nd e\nf g h\ni j\nk l m n\n", false);
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(reader_ahead) << "the first search waited for the reader to encode the second window";
  EXPECT_TRUE(writer_behind) << "the first detokenization waited for the second search";
  int lines = 0;
  for (char ch : r.out) lines += ch == '\n';
  EXPECT_EQ(lines, 5);
}

// translate_all over `count` decoders (lstranslate's --decoders); `on_start_of[m]` hooks decoder m's starts.
struct DecodersOutcome {
  std::string out, error;
  TranslationTotals totals;
  std::vector<std::set<std::thread::id>> threads;  // per decoder
  std::vector<int> starts;                         // per decoder
  std::thread::id caller;
};

DecodersOutcome run_decoders(const Case& c, const std::string& text, int count,
                             const std::vector<std::function<void(int)>>& on_start_of = {}) {
  testing::CapturedLog log;
  DecodersOutcome r;
  std::vector<std::unique_ptr<HookedModel>> models;
  std::vector<StepModel*> decoders;
  for (int m = 0; m < count; ++m) {
    models.push_back(std::make_unique<HookedModel>());
    if (static_cast<size_t>(m) < on_start_of.size()) models.back()->on_start = on_start_of[static_cast<size_t>(m)];
    decoders.push_back(models.back().get());
  }
  Encoder encoder;
  Decoder decoder;
  decoder.line_breaks = c.line_breaks;
  data::TextEncoder encode = [&](std::string_view t) { return encoder(t); };
  Detokenizer detokenize;
  if (!c.ids_output) detokenize = [&](const std::vector<int32_t>& ids) { return decoder(ids); };
  std::istringstream in(text);
  data::InputLineReader reader(in, "in");
  data::TranslationInput input(reader, encode, c.input);
  std::ostringstream out;
  within_deadline([&] {
    r.caller = std::this_thread::get_id();
    try {
      r.totals = translate_all(decoders, input, detokenize, c.settings, out);
    } catch (const Error& e) {
      r.error = e.what();
    }
  });
  r.out = out.str();
  for (const auto& model : models) {
    r.threads.push_back(model->threads);
    r.starts.push_back(model->starts);
  }
  return r;
}

// Several decoders give one decoder's output and totals (each batch is decoded on its own; sampling draws from the
// lines' own streams); the first decoder runs on the calling thread, the others beside it, and all take batches.
TEST(TranslatorPipeline, SeveralDecodersGiveTheOutputOfOne) {
  const std::string text = make_input(300, 9);
  int index = 0;
  for (Case c : settings_cases()) {
    for (const TranslationInputOptions& o : {small_windows(2, 4), small_windows(5, 20), small_windows(16, 100)}) {
      c.input = o;
      const DecodersOutcome one = run_decoders(c, text, 1);
      ASSERT_TRUE(one.error.empty()) << one.error;
      for (int count : {2, 3}) {
        SCOPED_TRACE("case " + std::to_string(index) + ", mini-batch " + std::to_string(o.mini_batch) + ", " +
                     std::to_string(count) + " decoders");
        // Searches of a millisecond, so that every decoder's thread is up before the others have taken all batches.
        const auto slow = [](int) { std::this_thread::sleep_for(1ms); };
        const DecodersOutcome several = run_decoders(c, text, count, std::vector<std::function<void(int)>>(3, slow));
        EXPECT_EQ(several.error, "");
        EXPECT_EQ(several.out, one.out);
        EXPECT_EQ(several.totals.lines, one.totals.lines);
        EXPECT_EQ(several.totals.target_tokens, one.totals.target_tokens);
        EXPECT_EQ(several.totals.line_breaks_replaced, one.totals.line_breaks_replaced);
        int starts = 0;
        for (int m = 0; m < count; ++m) {
          starts += several.starts[static_cast<size_t>(m)];
          const bool on_caller = several.threads[static_cast<size_t>(m)].count(several.caller) > 0;
          if (m == 0) {
            EXPECT_EQ(several.threads[0].size(), on_caller ? 1u : 0u) << "decoder 0 runs on the calling thread";
          } else {
            EXPECT_FALSE(on_caller) << "decoder " << m << " runs beside the calling thread";
          }
        }
        EXPECT_EQ(starts, one.starts[0]) << "every batch searched once";
        if (o.mini_batch == 2) {  // 38 windows of 4 batches: every decoder gets work
          for (int m = 0; m < count; ++m) EXPECT_GT(several.starts[static_cast<size_t>(m)], 0) << "decoder " << m;
        }
      }
    }
    ++index;
  }
}

// A decoder that fails stops the others and its error comes back; the call returns (within_deadline fails a hang).
TEST(TranslatorPipeline, AFailingDecoderStopsTheOthers) {
  const std::string text = make_input(300, 10);
  Case c = settings_cases()[0];
  c.input = small_windows(2, 8);
  const auto fail_at = [](int at) {
    return [at](int starts) {
      std::this_thread::sleep_for(1ms);
      if (starts == at) fail("decoder failed at its start {}", at);
    };
  };
  // The others are slower, so that the failing decoder surely gets its batches (a busy machine once left it fewer
  // than 5 of the 150 when all slept alike).
  const auto slow = [](int) { std::this_thread::sleep_for(5ms); };
  const DecodersOutcome r = run_decoders(c, text, 3, {slow, fail_at(3), slow});
  EXPECT_EQ(r.error, "decoder failed at its start 3");
  const DecodersOutcome first = run_decoders(c, text, 2, {fail_at(3), slow});
  EXPECT_EQ(first.error, "decoder failed at its start 3");
}

// An error in any thread comes back as the Error the serial loop throws (the first it would meet), with the same
// output written before it, and the call returns: within_deadline fails a hang, run() a thread left running.
TEST(TranslatorPipeline, AnErrorInAnyThreadIsTheSerialLoopsError) {
  const std::string text = make_input(200, 5);
  Case c = settings_cases()[1];
  c.input = small_windows(2, 1);
  auto fail_at = [](int at, const std::string& message, bool slow = false) {
    return [at, message, slow](int calls) {
      if (slow) std::this_thread::sleep_for(1ms);
      if (calls == at) fail("{}", message);
    };
  };

  Case search = c;  // the reader waits on its full queue, the writer on its empty one
  search.on_start = fail_at(1, "the model failed");
  expect_as_serial(search, text, "search fails early");
  search.on_start = fail_at(60, "the model failed");
  EXPECT_EQ(expect_as_serial(search, text, "search fails later").error, "the model failed");

  Case writer = c;  // the search waits for input when the writer fails
  writer.on_decode = fail_at(3, "the detokenizer failed");
  writer.on_encode = fail_at(-1, "", true);
  expect_as_serial(writer, text, "writer fails, slow reader");
  writer.on_encode = nullptr;
  writer.on_decode = fail_at(150, "the detokenizer failed");
  EXPECT_EQ(expect_as_serial(writer, text, "writer fails").error, "the detokenizer failed");

  Case reader = c;
  reader.on_encode = fail_at(100, "the encoder failed");
  const Outcome r = expect_as_serial(reader, text, "reader fails");
  EXPECT_EQ(r.error, "the encoder failed");
  EXPECT_FALSE(r.out.empty()) << "the lines before it were written";

  Case missing = c;
  missing.input_file = "/nonexistent/input.txt";
  EXPECT_NE(expect_as_serial(missing, "", "input file missing").error.find("/nonexistent/input.txt"),
            std::string::npos);

  // Two threads fail, the later one (in the serial loop's order) first: the error the serial loop meets first wins.
  // Windows of one batch of two lines: window k is encoder calls 2k and 2k + 1, and model start k.
  std::string plain;
  for (int i = 0; i < 80; ++i) plain += "a b" + std::string(i % 5, 'c') + "\n";
  Case both = c;
  auto reader_failed = std::make_shared<Flag>(), search_failed = std::make_shared<Flag>();
  both.on_encode = [reader_failed](int calls) {
    if (calls == 12) reader_failed->raise(), fail("the encoder failed");
  };
  both.on_start = [reader_failed](int starts) {  // searching window 5 while the reader fails on window 6
    if (starts == 5) reader_failed->wait(2s), fail("the model failed");
  };
  EXPECT_EQ(expect_as_serial(both, plain, "the reader fails on a later window while a search fails").error,
            "the model failed");

  both.on_encode = nullptr;
  both.on_start = [search_failed](int starts) {
    if (starts == 30) search_failed->raise(), fail("the model failed");
  };
  both.on_decode = [search_failed](int calls) {  // line 5's output (2 per line) fails once the search failed
    if (calls == 10) search_failed->wait(2s), fail("the detokenizer failed");
  };
  EXPECT_EQ(expect_as_serial(both, plain, "the writer fails on an earlier line after the search failed").error,
            "the detokenizer failed");
}

// Writing fails (a full disk): Error, and the call returns although the search had more to hand over.
TEST(TranslatorPipeline, AFailedWriteIsAnError) {
  Case c;
  c.settings.beam.beam_size = 2;
  c.input = small_windows(2, 1);
  HookedModel model;
  std::istringstream in(make_input(300, 2));
  data::InputLineReader reader(in, "in");
  data::TranslationInput input(reader, nullptr, c.input);
  std::ostringstream out;
  out.setstate(std::ios::badbit);
  std::string error;
  within_deadline([&] {
    try {
      translate_all(model, input, nullptr, c.settings, out);
    } catch (const Error& e) {
      error = e.what();
    }
  });
  EXPECT_NE(error.find("writing the output failed"), std::string::npos) << error;
}

// Empty and rejected lines keep their place, and progress lines still come (here after every window).
TEST(TranslatorPipeline, EmptyLinesKeepTheirPlaceAndProgressIsLogged) {
  testing::CapturedLog log;
  TranslateSettings settings;
  settings.beam.beam_size = 2;
  std::istringstream in("\n5 6\n\n\n7 8 9\n\xff\n10\n\n");
  data::InputLineReader reader(in, "in");
  data::TranslationInput input(reader, nullptr, small_windows(1, 1));
  testing::ToyStepModel model(44, 3);
  std::ostringstream out;
  const TranslationTotals totals = translate_all(model, input, nullptr, settings, out, 1e-9);
  EXPECT_EQ(totals.lines, 8);
  std::vector<std::string> lines;
  std::istringstream got(out.str());
  for (std::string l; std::getline(got, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 8u) << out.str();
  for (size_t i : {0, 2, 3, 5, 7}) EXPECT_EQ(lines[i], "") << "line " << i;
  for (size_t i : {1, 4, 6}) EXPECT_NE(lines[i], "") << "line " << i;
  const std::string text = log.text();
  int progress = 0;
  for (size_t at = text.find("translated "); at != std::string::npos; at = text.find("translated ", at + 1))
    ++progress;
  EXPECT_EQ(progress, 8) << "one per window of 1 line\n" << text;
  EXPECT_NE(text.find("translated 8 lines: "), std::string::npos) << text;
  EXPECT_GE(totals.search_seconds, 0.0);
}

}  // namespace
}  // namespace lseq
