#include "core/model/step_sharing.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <spdlog/spdlog.h>

#include "util/error.h"

namespace lseq {

int step_rows(int n, int limit) {
  if (n <= 0) return n;
  int step = 8;
  while (step * 8 < n) step *= 2;
  return std::min(limit, (n + step - 1) / step * step);
}

int StepRecorder::rows(int live, int limit) const {
  return backend_.can_record() ? step_rows(live, limit) : std::min(live, limit);
}

void StepRecorder::run(const Shape& shape, bool record, const std::function<void()>& ops) {
  if (on_) {
    auto it = graphs_.find(shape);
    if (it != graphs_.end()) {
      it->second.last_use = ++uses_;
      ++replays_;
      return it->second.graph->replay();
    }
    if (record && max_graphs_ > 0) {
      drop_least_recent(max_graphs_ - 1);
      std::unique_ptr<kernels::OpGraph> graph;
      const auto begin = std::chrono::steady_clock::now();
      try {
        graph = backend_.record(ops);
      } catch (const Error& e) {
        // Decoding still works op by op: say so once and stop trying (a driver that cannot capture, say).
        spdlog::warn("decoding steps cannot be recorded as CUDA graphs ({}); every step now runs op by op", e.what());
        on_ = false;
        graphs_.clear();
        held_ = 0;
      }
      if (graph) {
        ++recordings_;
        recording_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        graph->replay();
        graphs_.emplace(shape, Recording{std::move(graph), ++uses_});
        held_ = graphs_.size();
        return;
      }
    }
  }
  const auto begin = std::chrono::steady_clock::now();
  ops();
  ++runs_op_by_op_;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  op_by_op_seconds_ += seconds;
  spdlog::trace("shape ({}, {}, {}, {}) ran op by op: {:.3f} ms of host time", std::get<0>(shape), std::get<1>(shape),
                std::get<2>(shape), std::get<3>(shape), seconds * 1e3);
}

void StepRecorder::limit(std::size_t max_graphs) {
  max_graphs_ = max_graphs;
  drop_least_recent(max_graphs);
}

void StepRecorder::drop_least_recent(std::size_t keep) {
  while (graphs_.size() > keep) {
    graphs_.erase(std::min_element(graphs_.begin(), graphs_.end(), [](const auto& a, const auto& b) {
      return a.second.last_use < b.second.last_use;
    }));
  }
  held_ = graphs_.size();
}

void StepRecorder::run_step(int live, int limit, int k, const std::function<void()>& ops) {
  const int computed = rows(live, limit);
  const Shape shape{computed, 0, 0, k};
  run(shape, repeats(shape), ops);
  ++steps_;
  live_rows_ += static_cast<std::size_t>(live);
  computed_rows_ += static_cast<std::size_t>(computed);
}

StepModel::RunCounts StepRecorder::run_counts() const {
  StepModel::RunCounts counts;
  counts.replays = replays_;
  counts.recordings = recordings_.load(std::memory_order_relaxed);
  counts.op_by_op = runs_op_by_op_;
  counts.recording_seconds = recording_seconds_;
  counts.op_by_op_seconds = op_by_op_seconds_;
  counts.steps = steps_;
  counts.live_rows = live_rows_;
  counts.computed_rows = computed_rows_;
  return counts;
}

bool StepRecorder::repeats(const Shape& shape) {
  const bool repeated = shape == last_;
  last_ = shape;
  return repeated;
}

bool StepRecorder::seen_before(const Shape& shape) {
  const bool seen = !seen_.insert(shape).second;
  if (seen_.size() > 4 * kMaxGraphs) seen_.clear();  // a bound on the memory; shapes are then learnt again
  return seen;
}

void OriginTables::upload_identity(kernels::Backend& backend) const {
  std::vector<int32_t> values(static_cast<std::size_t>(rows) * positions);
  for (std::size_t e = 0; e < values.size(); ++e) values[e] = static_cast<int32_t>(e / positions);
  backend.copy_to_device(identity, values.data(), values.size() * sizeof(int32_t));
}

void OriginTables::reset(kernels::Backend& backend) const {
  const std::size_t bytes = static_cast<std::size_t>(rows) * positions * sizeof(int32_t);
  backend.copy(origin, identity, bytes);
  backend.copy(spare, identity, bytes);
}

void OriginTables::reorder(kernels::Backend& backend, const int32_t* parents, int n, int filled) const {
  // int32 rows as 4-byte f32 elements: gather_rows copies them bit for bit.
  backend.gather_rows(kernels::DType::f32, origin, positions, parents, n, filled, spare, positions, nullptr);
  backend.gather_rows(kernels::DType::f32, spare, positions, nullptr, n, filled, origin, positions, nullptr);
}

}  // namespace lseq
