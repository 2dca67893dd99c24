#pragma once
// lsserve's counters, gauges and histograms, written in Prometheus' text format (version 0.0.4) for GET /metrics.
// Every name starts with lsserve_; counters end in _total; a histogram has cumulative _bucket{le="..."} lines, _sum
// and _count. Thread-safe: HTTP threads and the decoding thread update them, /metrics reads them.
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/serve/pending_request.h"

namespace lseq::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending; +Inf is added
  void observe(double value);
  void write(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

// What the decoding thread did with one batch.
struct BatchReport {
  int sentences = 0;
  int64_t source_tokens = 0;  // real, eos included
  int64_t padded_tokens = 0;  // sentences x longest
  int64_t target_tokens = 0;  // best hypotheses' tokens, eos not counted
  double decode_seconds = 0;
  double queue_seconds = 0;   // how long its oldest sentence waited
};

// The state of the moment, read when /metrics is asked.
struct ServeGauges {
  int queue_sentences = 0;   // waiting to be decoded
  int queue_requests = 0;    // requests with a sentence waiting
  int in_flight = 0;         // requests accepted and not yet answered
  bool draining = false;
  std::size_t recorded_steps = 0;   // CUDA graphs the decoders hold (each costs memory: bounded per decoder)
  std::size_t step_recordings = 0;  // made so far (a dropped shape recorded again counts again)
};

class ServeMetrics {
 public:
  explicit ServeMetrics(int max_batch_sentences);

  void count_response(int status);                 // every answer of POST /translate, by HTTP status
  void observe_latency(double seconds);            // accepted requests, arrival to answer
  void count_sentences(const char* outcome, int64_t count);  // translated, error, timed_out, cancelled
  void observe_batch(const BatchReport& report, Clock::time_point finished);
  // A continuous search reports each joining chunk through observe_batch (without target tokens and decoding time)
  // and these as they come: target tokens of finished sentences, decoding time when the search ends.
  void observe_decoded(int64_t target_tokens, double decode_seconds, Clock::time_point when);

  std::string render(const ServeGauges& gauges, Clock::time_point now) const;

 private:
  static constexpr int kRateSeconds = 10;  // target tokens/s over this many seconds
  mutable std::mutex mutex_;
  std::map<int, uint64_t> responses_;
  std::map<std::string, uint64_t> sentences_;
  Histogram latency_, batch_sentences_, queue_wait_;
  uint64_t batches_ = 0;
  int64_t source_tokens_ = 0, padded_tokens_ = 0, target_tokens_ = 0;
  double decode_seconds_ = 0;
  void add_decoded_locked(int64_t target_tokens, double decode_seconds, Clock::time_point when);
  std::array<int64_t, kRateSeconds> tokens_in_second_{};
  std::array<int64_t, kRateSeconds> second_of_slot_{};
  Clock::time_point start_;
};

}  // namespace lseq::serve
