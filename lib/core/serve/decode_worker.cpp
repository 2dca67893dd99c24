#include "core/serve/decode_worker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>

#include "core/search/beam_search.h"
#include "core/search/sampling.h"

namespace lseq::serve {

DecodeWorker::DecodeWorker(StepModel& model, Scheduler& scheduler, ServeMetrics& metrics)
    : model_(model), scheduler_(scheduler), metrics_(metrics) {}

DecodeWorker::~DecodeWorker() { join(); }

void DecodeWorker::start() { thread_ = std::thread([this] { run(); }); }

void DecodeWorker::join() {
  if (thread_.joinable()) thread_.join();
}

void DecodeWorker::run() {
  ScheduledBatch scheduled;
  while (scheduler_.next(scheduled)) decode(scheduled);
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
