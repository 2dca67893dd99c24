// Host-side cost of search itself (top-k over vocab-sized rows, bookkeeping, select), without a model: a
// StepModel that returns precomputed random log-softmax rows. Reports time per step and per hypothesis-step
// for each beam size and batch size, vocab 8000 and 32000, twice: once through step() (the host top-k
// over whole rows, what the CPU backend's search does) and once through step_topk() answered from each row's
// precomputed top-k (what a GPU step hands the search: only the search's own bookkeeping is left, the part that
// the GPU waits for between steps). Reports; never asserts.
// Usage: bench_search_overhead [--beams 1 4] [--batch-sizes 1 16 64 128]   (the benchmarks' options: --help)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include "bench_options.h"
#include "core/cli/app_main.h"
#include "core/search/beam_search.h"
#include "core/search/step_model.h"
#include "data/translation_input.h"

namespace {

class TableDecoder : public lseq::StepModel {
 public:
  TableDecoder(int vocab, int rows) : vocab_(vocab), rows_(rows), table_(static_cast<size_t>(vocab) * rows) {
    std::mt19937 rng(7);
    std::normal_distribution<double> normal(0, 3);
    for (int r = 0; r < rows; ++r) {
      std::vector<double> x(vocab);
      double best = -1e300, total = 0;
      for (auto& v : x) best = std::max(best, v = normal(rng));
      for (double v : x) total += std::exp(v - best);
      for (int v = 0; v < vocab; ++v) table_[static_cast<size_t>(r) * vocab + v] = static_cast<float>(x[v] - best - std::log(total));
      table_[static_cast<size_t>(r) * vocab + 3] = -4.0f;  // eos fairly likely: outputs of a few dozen tokens
      // The row's best kTopK words (ids from 4, as the decoders' top-k), best first.
      std::vector<int32_t> order(vocab - 4);
      for (int v = 4; v < vocab; ++v) order[v - 4] = v;
      const float* row = table_.data() + static_cast<size_t>(r) * vocab;
      std::partial_sort(order.begin(), order.begin() + kTopK, order.end(),
                        [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      for (int i = 0; i < kTopK; ++i) {
        top_ids_.push_back(order[i]);
        top_values_.push_back(row[order[i]]);
      }
    }
  }
  int vocab_size() const override { return vocab_; }
  void start(const std::vector<int32_t>&, const std::vector<int32_t>&, int sentences, int) override {
    state_.assign(sentences, 0);
  }
  void select(const std::vector<int32_t>& parents, const std::vector<int32_t>&) override {
    std::vector<uint32_t> next;
    for (int32_t p : parents) next.push_back(state_[p]);
    state_.swap(next);
  }
  void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) override {
    log_probs.resize(tokens.size() * vocab_);
    for (size_t h = 0; h < tokens.size(); ++h) {
      state_[h] = state_[h] * 2654435761u + static_cast<uint32_t>(tokens[h]) + 1;
      const float* row = table_.data() + static_cast<size_t>(state_[h] % rows_) * vocab_;
      std::copy(row, row + vocab_, log_probs.data() + h * vocab_);
    }
    hypothesis_steps_ += tokens.size();
    ++steps_;
  }
  // Answered from the row's precomputed top-k when device_topk is set (the copy a GPU step leaves), otherwise by
  // the default: step() and the host top-k over the whole row.
  void step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values, std::vector<int32_t>& ids,
                 std::vector<float>& eos_log_probs) override {
    if (!device_topk || k > kTopK) return StepModel::step_topk(tokens, k, values, ids, eos_log_probs);
    const size_t n = tokens.size(), kk = static_cast<size_t>(k);
    values.resize(n * kk);
    ids.resize(n * kk);
    eos_log_probs.resize(n);
    for (size_t h = 0; h < n; ++h) {
      state_[h] = state_[h] * 2654435761u + static_cast<uint32_t>(tokens[h]) + 1;
      const size_t row = state_[h] % rows_;
      std::copy_n(top_values_.data() + row * kTopK, kk, values.data() + h * kk);
      std::copy_n(top_ids_.data() + row * kTopK, kk, ids.data() + h * kk);
      eos_log_probs[h] = table_[row * vocab_ + 3];
    }
    hypothesis_steps_ += n;
    ++steps_;
  }
  int live() const override { return static_cast<int>(state_.size()); }
  long long hypothesis_steps_ = 0, steps_ = 0;
  bool device_topk = false;

 private:
  static constexpr int kTopK = 8;
  int vocab_, rows_;
  std::vector<float> table_, top_values_;
  std::vector<int32_t> top_ids_;
  std::vector<uint32_t> state_;
};

int run(const lseq::Options& options) {
  const std::vector<int64_t> beams = options.get_ints("beams");
  const std::vector<int64_t> batch_sizes = lseq::bench::ints_or(options, "batch-sizes", {1, 16, 64, 128});
  fmt::print("{:>10} {:>6} {:>5} {:>6} {:>10} {:>12} {:>14} {:>16}\n", "top-k", "vocab", "beam", "batch", "sent/s",
             "steps/batch", "us/step", "ns/hyp-step");
  for (bool device_topk : {false, true})
  for (int vocab : {8000, 32000}) {
    TableDecoder decoder(vocab, 257);
    decoder.device_topk = device_topk;
    for (int64_t beam64 : beams) {
      for (int64_t batch64 : batch_sizes) {
        const int beam = static_cast<int>(beam64), batch = static_cast<int>(batch64);
        std::vector<std::vector<int32_t>> sources(batch, std::vector<int32_t>(20, 5));
        lseq::data::Batch b = lseq::data::make_source_batch(sources, {});
        lseq::BeamSearchOptions o;
        o.beam_size = beam;
        int repeats = std::max(1, 256 / batch);
        decoder.hypothesis_steps_ = decoder.steps_ = 0;
        auto begin = std::chrono::steady_clock::now();
        for (int r = 0; r < repeats; ++r) lseq::beam_search(decoder, b, o);
        double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
        fmt::print("{:>10} {:>6} {:>5} {:>6} {:>10.1f} {:>12.1f} {:>14.1f} {:>16.1f}\n",
                   device_topk ? "precomputed" : "host", vocab, beam, batch,
                   repeats * batch / seconds, static_cast<double>(decoder.steps_) / repeats,
                   seconds * 1e6 / decoder.steps_, seconds * 1e9 / decoder.hypothesis_steps_);
      }
    }
  }
  fmt::print("(host rows include the table decoder's row copy; the search's own share is the rest)\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return lseq::app_main(lseq::App::bench, argc, argv, run); }
