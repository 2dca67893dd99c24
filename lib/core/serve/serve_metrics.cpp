#include "core/serve/serve_metrics.h"

#include <fmt/format.h>

#include <cmath>

namespace lseq::serve {

namespace {

std::string number(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", value);
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void scalar(std::string& out, const std::string& name, const char* type, const std::string& help, double value) {
  header(out, name, type, help);
  out += fmt::format("{} {}\n", name, number(value));
}

std::vector<double> batch_bounds(int max_sentences) {
  std::vector<double> bounds;
  for (int b = 1; b < max_sentences; b *= 2) bounds.push_back(b);
  bounds.push_back(max_sentences);
  return bounds;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t bucket = 0;
  while (bucket < bounds_.size() && value > bounds_[bucket]) ++bucket;
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& help) const {
  header(out, name, "histogram", help);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const double bound = i < bounds_.size() ? bounds_[i] : INFINITY;
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, number(bound), cumulative);
  }
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, number(sum_), name, count_);
}

ServeMetrics::ServeMetrics(int max_batch_sentences)
    : latency_({0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}),
      batch_sentences_(batch_bounds(max_batch_sentences)),
      queue_wait_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}),
      start_(Clock::now()) {
  second_of_slot_.fill(-1);
}

void ServeMetrics::count_response(int status) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++responses_[status];
}

void ServeMetrics::observe_latency(double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  latency_.observe(seconds);
}

void ServeMetrics::count_sentences(const char* outcome, int64_t count) {
  if (count <= 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  sentences_[outcome] += static_cast<uint64_t>(count);
}

void ServeMetrics::observe_batch(const BatchReport& report, Clock::time_point finished) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++batches_;
  batch_sentences_.observe(report.sentences);
  queue_wait_.observe(report.queue_seconds);
  source_tokens_ += report.source_tokens;
  padded_tokens_ += report.padded_tokens;
  add_decoded_locked(report.target_tokens, report.decode_seconds, finished);
}

void ServeMetrics::observe_decoded(int64_t target_tokens, double decode_seconds, Clock::time_point when) {
  std::lock_guard<std::mutex> lock(mutex_);
  add_decoded_locked(target_tokens, decode_seconds, when);
}

void ServeMetrics::add_decoded_locked(int64_t target_tokens, double decode_seconds, Clock::time_point when) {
  target_tokens_ += target_tokens;
  decode_seconds_ += decode_seconds;
  const int64_t second = std::chrono::duration_cast<std::chrono::seconds>(when - start_).count();
  const size_t slot = static_cast<size_t>(second % kRateSeconds);
  if (second_of_slot_[slot] != second) {
    second_of_slot_[slot] = second;
    tokens_in_second_[slot] = 0;
  }
  tokens_in_second_[slot] += target_tokens;
}

std::string ServeMetrics::render(const ServeGauges& gauges, Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  header(out, "lsserve_requests_total", "counter", "Answers to POST /translate, by HTTP status");
  if (responses_.empty()) out += "lsserve_requests_total{code=\"200\"} 0\n";
  for (const auto& [code, count] : responses_) out += fmt::format("lsserve_requests_total{{code=\"{}\"}} {}\n", code, count);
  header(out, "lsserve_sentences_total", "counter",
         "Sentences of accepted requests, by outcome (translated, error, timed_out, cancelled)");
  for (const char* outcome : {"translated", "error", "timed_out", "cancelled"}) {
    auto it = sentences_.find(outcome);
    out += fmt::format("lsserve_sentences_total{{outcome=\"{}\"}} {}\n", outcome, it == sentences_.end() ? 0 : it->second);
  }
  latency_.write(out, "lsserve_request_duration_seconds", "Accepted requests from arrival to answer");
  scalar(out, "lsserve_queue_sentences", "gauge", "Sentences waiting to be decoded", gauges.queue_sentences);
  scalar(out, "lsserve_queue_requests", "gauge", "Requests with sentences waiting to be decoded", gauges.queue_requests);
  scalar(out, "lsserve_requests_in_flight", "gauge", "Requests accepted and not yet answered", gauges.in_flight);
  scalar(out, "lsserve_draining", "gauge", "1 after SIGTERM: new requests are refused, queued ones finish",
         gauges.draining ? 1 : 0);
  scalar(out, "lsserve_batches_total", "counter", "Batches decoded", static_cast<double>(batches_));
  batch_sentences_.write(out, "lsserve_batch_sentences", "Sentences per decoded batch");
  queue_wait_.write(out, "lsserve_batch_queue_wait_seconds", "How long the oldest sentence of a batch waited for it");
  scalar(out, "lsserve_source_tokens_total", "counter", "Source tokens decoded (eos included)",
         static_cast<double>(source_tokens_));
  scalar(out, "lsserve_padded_source_tokens_total", "counter",
         "Source tokens decoded with the padding of their batches (sentences x longest)",
         static_cast<double>(padded_tokens_));
  scalar(out, "lsserve_target_tokens_total", "counter", "Target tokens of the best translations (eos not counted)",
         static_cast<double>(target_tokens_));
  const int64_t second = std::chrono::duration_cast<std::chrono::seconds>(now - start_).count();
  int64_t recent = 0;
  for (int s = 0; s < kRateSeconds; ++s)
    if (second_of_slot_[static_cast<size_t>(s)] > second - kRateSeconds) recent += tokens_in_second_[static_cast<size_t>(s)];
  scalar(out, "lsserve_target_tokens_per_second", "gauge",
         fmt::format("Target tokens of the best translations per second over the last {} s", kRateSeconds),
         static_cast<double>(recent) / kRateSeconds);
  scalar(out, "lsserve_decode_seconds_total", "counter", "Time the decoding thread spent on batches", decode_seconds_);
  scalar(out, "lsserve_recorded_steps", "gauge",
         "Decoding steps and encodings the decoders hold recorded as CUDA graphs (a bounded number per decoder)",
         static_cast<double>(gauges.recorded_steps));
  scalar(out, "lsserve_step_recordings_total", "counter",
         "Recordings made (a shape dropped for a newer one and recorded again counts again)",
         static_cast<double>(gauges.step_recordings));
  return out;
}

}  // namespace lseq::serve
