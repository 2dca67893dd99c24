// GET /metrics: Prometheus' text format, line by line, with cumulative histograms and the figures recorded.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <set>
#include <sstream>

#include "core/serve/serve_metrics.h"

namespace lseq::serve {
namespace {

// The value of a sample line "name{labels} value", or NaN when there is none.
double sample(const std::string& text, const std::string& series) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line))
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return std::nan("");
}

TEST(ServeMetrics, PrometheusTextFormat) {
  ServeMetrics metrics(64);
  const auto start = Clock::now();
  metrics.count_response(200);
  metrics.count_response(200);
  metrics.count_response(503);
  metrics.observe_latency(0.02);
  metrics.observe_latency(3);
  metrics.count_sentences("translated", 7);
  metrics.count_sentences("cancelled", 2);
  BatchReport report;
  report.sentences = 5;
  report.source_tokens = 40;
  report.padded_tokens = 50;
  report.target_tokens = 35;
  report.decode_seconds = 0.5;
  report.queue_seconds = 0.003;
  metrics.observe_batch(report, start);
  ServeGauges gauges;
  gauges.queue_sentences = 12;
  gauges.in_flight = 3;
  gauges.recorded_steps = 41;
  gauges.step_recordings = 57;
  const std::string text = metrics.render(gauges, start);

  const std::regex comment(R"(# (HELP|TYPE) lsserve_[a-z_]+ .+)");
  const std::regex line(R"(lsserve_[a-z_]+(\{[a-z]+="[^"]*"\})? (-?[0-9.e+-]+|\+Inf|NaN))");
  std::istringstream lines(text);
  std::string l;
  std::set<std::string> typed;
  while (std::getline(lines, l)) {
    EXPECT_TRUE(std::regex_match(l, comment) || std::regex_match(l, line)) << "not Prometheus text: " << l;
    if (l.rfind("# TYPE ", 0) == 0) EXPECT_TRUE(typed.insert(l.substr(7, l.find(' ', 7) - 7)).second) << l;
  }
  EXPECT_EQ(sample(text, "lsserve_requests_total{code=\"200\"}"), 2);
  EXPECT_EQ(sample(text, "lsserve_requests_total{code=\"503\"}"), 1);
  EXPECT_EQ(sample(text, "lsserve_sentences_total{outcome=\"translated\"}"), 7);
  EXPECT_EQ(sample(text, "lsserve_sentences_total{outcome=\"cancelled\"}"), 2);
  EXPECT_EQ(sample(text, "lsserve_sentences_total{outcome=\"timed_out\"}"), 0);
  EXPECT_EQ(sample(text, "lsserve_request_duration_seconds_bucket{le=\"0.01\"}"), 0);
  EXPECT_EQ(sample(text, "lsserve_request_duration_seconds_bucket{le=\"0.025\"}"), 1);
  EXPECT_EQ(sample(text, "lsserve_request_duration_seconds_bucket{le=\"5\"}"), 2);
  EXPECT_EQ(sample(text, "lsserve_request_duration_seconds_bucket{le=\"+Inf\"}"), 2);
  EXPECT_EQ(sample(text, "lsserve_request_duration_seconds_count"), 2);
  EXPECT_NEAR(sample(text, "lsserve_request_duration_seconds_sum"), 3.02, 1e-9);
  EXPECT_EQ(sample(text, "lsserve_batch_sentences_bucket{le=\"4\"}"), 0);
  EXPECT_EQ(sample(text, "lsserve_batch_sentences_bucket{le=\"8\"}"), 1);
  EXPECT_EQ(sample(text, "lsserve_batch_sentences_bucket{le=\"64\"}"), 1);
  EXPECT_EQ(sample(text, "lsserve_queue_sentences"), 12);
  EXPECT_EQ(sample(text, "lsserve_requests_in_flight"), 3);
  EXPECT_EQ(sample(text, "lsserve_recorded_steps"), 41);
  EXPECT_EQ(sample(text, "lsserve_step_recordings_total"), 57);
  EXPECT_EQ(sample(text, "lsserve_target_tokens_total"), 35);
  EXPECT_EQ(sample(text, "lsserve_padded_source_tokens_total"), 50);
  EXPECT_EQ(sample(text, "lsserve_target_tokens_per_second"), 3.5) << "35 tokens over the last 10 s";
  EXPECT_EQ(sample(metrics.render(gauges, start + std::chrono::seconds(30)), "lsserve_target_tokens_per_second"), 0);
}

}  // namespace
}  // namespace lseq::serve
