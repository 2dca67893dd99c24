#include "core/serve/decode_worker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <memory>
#include <unordered_map>

#include "core/search/beam_search.h"
#include "core/search/sampling.h"

namespace lseq::serve {

DecodeWorker::DecodeWorker(StepModel& model, Scheduler& scheduler, ServeMetrics& metrics, bool continuous)
    : model_(model), scheduler_(scheduler), metrics_(metrics), continuous_(continuous) {}

DecodeWorker::~DecodeWorker() { join(); }

void DecodeWorker::start() { thread_ = std::thread([this] { run(); }); }

void DecodeWorker::join() {
  if (thread_.joinable()) thread_.join();
}

void DecodeWorker::run() {
  ScheduledBatch scheduled;
  while (scheduler_.next(scheduled)) {
    if (continuous_ && !scheduled.settings.sample && model_.can_admit())
      decode_continuously(scheduled);
    else
      decode(scheduled);
  }
}

void DecodeWorker::decode_continuously(ScheduledBatch& first) {
  struct Owner {
    std::shared_ptr<PendingRequest> request;
    int index = 0;  // the sentence's index in its request
  };
  std::unordered_map<int64_t, Owner> owners;  // by the search's line id: sentences taken and not yet answered
  int64_t next_line = 0;
  const TranslateSettings settings = first.settings;
  const Clock::time_point begin = Clock::now();
  // A chunk joining the search: its sentences numbered for the search, their owners kept, the chunk reported like
  // a batch (its size, tokens and wait; target tokens follow as its sentences finish).
  auto adopt = [&](ScheduledBatch& scheduled, data::Batch& chunk) {
    const Clock::time_point now = Clock::now();
    BatchReport report;
    report.sentences = scheduled.batch.size;
    report.source_tokens = scheduled.batch.src_tokens();
    report.padded_tokens = static_cast<int64_t>(scheduled.batch.size) * scheduled.batch.src_len;
    report.queue_seconds = std::chrono::duration<double>(now - scheduled.oldest_arrival).count();
    metrics_.observe_batch(report, now);
    chunk = std::move(scheduled.batch);
    for (size_t i = 0; i < chunk.line_ids.size(); ++i) {
      owners[next_line] = Owner{std::move(scheduled.requests[i]), static_cast<int>(chunk.line_ids[i])};
      chunk.line_ids[i] = next_line++;
    }
    scheduled.requests.clear();
  };
  bool first_taken = false;
  const SentenceFeed feed = [&](int max_sentences, const std::function<bool(int)>& fits, data::Batch& chunk) {
    chunk = data::Batch{};
    if (!fits) {  // a new search: the scheduled batch; after it, the thread's loop plans the next batch
      if (first_taken) return false;
      first_taken = true;
      adopt(first, chunk);
      return true;
    }
    ScheduledBatch joining;
    if (!scheduler_.take_joining(settings, max_sentences, fits, joining)) return false;
    adopt(joining, chunk);
    return true;
  };
  const LineSink done = [&](int64_t line, const NBestList& list) {
    const auto owner = owners.find(line);
    metrics_.observe_decoded(list.empty() ? 0 : static_cast<int64_t>(list.front().tokens.size()), 0,
                             Clock::now());
    owner->second.request->set_result(owner->second.index, NBestList(list));
    owners.erase(owner);
  };
  // Streaming requests hear each token as soon as it is final (greedy; the others' are ignored).
  const LineTokenSink tokens = [&](int64_t line, int32_t token) {
    const Owner& owner = owners.at(line);
    owner.request->append_token(owner.index, token);
  };
  std::string failure;
  try {
    beam_search_continuous(model_, feed, settings.beam, done, tokens);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const int unanswered = static_cast<int>(owners.size());
  if (failure.empty() && unanswered > 0)
    failure = "internal: the search finished without " + std::to_string(unanswered) + " of its sentences";
  if (!failure.empty()) {
    spdlog::error("a continuous search failed with {} sentences unanswered: {}", unanswered, failure);
    for (auto& [line, owner] : owners) owner.request->set_error(owner.index, "decoding failed: " + failure);
    metrics_.count_sentences("error", unanswered);
  }
  owners.clear();  // the requests no longer wait on this thread
  const Clock::time_point end = Clock::now();
  metrics_.observe_decoded(0, std::chrono::duration<double>(end - begin).count(), end);
  spdlog::debug("continuous search of {} sentences decoded in {:.1f} ms", next_line,
                std::chrono::duration<double>(end - begin).count() * 1e3);
}

void DecodeWorker::decode(ScheduledBatch& scheduled) {
  const Clock::time_point begin = Clock::now();
  const data::Batch& batch = scheduled.batch;
  BatchReport report;
  report.sentences = batch.size;
  report.source_tokens = batch.src_tokens();
  report.padded_tokens = static_cast<int64_t>(batch.size) * batch.src_len;
  report.queue_seconds = std::chrono::duration<double>(begin - scheduled.oldest_arrival).count();
  std::string failure;
  std::vector<char> answered(static_cast<size_t>(batch.size), 0);
  try {
    // Streaming requests hear each token as soon as it is final (greedy or sampled; the others' are ignored).
    const TokenSink sink = [&scheduled, &batch](int i, int32_t token) {
      scheduled.requests[static_cast<size_t>(i)]->append_token(static_cast<int>(batch.line_ids[static_cast<size_t>(i)]),
                                                               token);
    };
    // Each sentence's answer goes to its request as soon as the sentence is finished: a request whose sentences
    // share a batch with a much longer one (a 49-word line ran to 190 steps where its neighbours ended by ~30) no
    // longer waits for it.
    const SentenceSink done = [&](int i, const NBestList& list) {
      if (!list.empty()) report.target_tokens += static_cast<int64_t>(list.front().tokens.size());
      scheduled.requests[static_cast<size_t>(i)]->set_result(static_cast<int>(batch.line_ids[static_cast<size_t>(i)]),
                                                             NBestList(list));
      answered[static_cast<size_t>(i)] = 1;
    };
    // The lists the search returns were handed over one by one through `done`.
    if (scheduled.settings.sample)
      sample(model_, batch, scheduled.settings.sampling, sink, done);
    else
      beam_search(model_, batch, scheduled.settings.beam, sink, done);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const int unanswered = static_cast<int>(std::count(answered.begin(), answered.end(), 0));
  if (failure.empty() && unanswered > 0)
    failure = "internal: the search finished without " + std::to_string(unanswered) + " of its " +
              std::to_string(batch.size) + " sentences";
  if (!failure.empty()) {
    spdlog::error("decoding a batch of {} sentences failed: {}", batch.size, failure);
    for (int i = 0; i < batch.size; ++i)
      if (!answered[static_cast<size_t>(i)])
        scheduled.requests[static_cast<size_t>(i)]->set_error(
            static_cast<int>(batch.line_ids[static_cast<size_t>(i)]), "decoding failed: " + failure);
    metrics_.count_sentences("error", unanswered);
  }
  scheduled.requests.clear();  // the requests no longer wait on this thread
  const Clock::time_point end = Clock::now();
  report.decode_seconds = std::chrono::duration<double>(end - begin).count();
  metrics_.observe_batch(report, end);
  // For tuning the scheduler (--log-level debug): what each batch held and how long it took.
  spdlog::debug("batch of {} sentences ({} source tokens, padded {}): waited {:.1f} ms, decoded in {:.1f} ms, {} "
                "target tokens",
                report.sentences, report.source_tokens, report.padded_tokens, report.queue_seconds * 1e3,
                report.decode_seconds * 1e3, report.target_tokens);
}

}  // namespace lseq::serve
