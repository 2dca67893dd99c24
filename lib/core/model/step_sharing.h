#pragma once
// What the two incremental decoders (EncoderDecoderStepModel, DecoderOnlyStepModel) share: the row buckets of a
// step, the recorded steps kept by shape, and the position-origin tables of beam search's self-attention caches
// (docs/decoding.md).
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "core/search/step_model.h"
#include "kernels/backend.h"

namespace lseq {

// The rows a step computes for `live` hypotheses (and the source length an encoding runs at): rounded up to a few
// sizes per power of two (at most a quarter more; multiples of 8 below 64), at most `limit`, so that the shapes of a
// search whose hypotheses finish one by one, and of batches whose longest source differs, repeat, and their
// recorded steps (CUDA graphs) replay instead of issuing every op again with a new shape. The extra rows are
// computed and ignored: rows never read each other's state.
int step_rows(int live, int limit);

// Recorded steps by shape (Backend::record: CUDA graphs on the GPU; the CPU backend runs every op). A shape is what
// a step's op arguments depend on; the decoders choose it.
class StepRecorder {
 public:
  using Shape = std::tuple<int, int, int, int>;
  // Recordings kept by default (--max-recorded-steps); then the least recently replayed one is dropped for a new
  // one. A server's batches of every size and source length need about a hundred (steps by rows and k, encodings
  // by sentences and length); each held one costs host memory (about 0.9 MiB on an H100, transformer-base).
  static constexpr std::size_t kMaxGraphs = 256;

  explicit StepRecorder(kernels::Backend& backend) : backend_(backend) {}
  // Replays the recording of `shape` if there is one; otherwise records `ops` and replays them when `record` is
  // set (and recording is on), else runs them op by op. A backend that fails to record turns recording off (with
  // one warning) and the ops run op by op.
  void run(const Shape& shape, bool record, const std::function<void()>& ops);
  // Whether `shape` is the shape of the previous call (a step shape that repeats is worth recording); remembers it.
  bool repeats(const Shape& shape);
  // Whether `shape` was seen before (start()'s encodings, recorded from a shape's second batch on); remembers it.
  bool seen_before(const Shape& shape);

  // A decoding step of `live` hypotheses (at most `limit`) and top-k `k` (0: none): its shape is {rows(live, limit),
  // 0, 0, k}, recorded when it repeats the previous step's shape, replayed once recorded. `ops` computes
  // rows(live, limit) rows. Counted in run_counts() (steps, live and computed rows).
  void run_step(int live, int limit, int k, const std::function<void()>& ops);

  // The rows a step computes for `live` hypotheses (or the length an encoding runs at): step_rows on a backend that
  // records; exactly `live` on one that cannot (the CPU), where padded rows would only add work. Whether recording
  // is used (use()) does not change it, so that recorded and op-by-op steps compute the same shapes.
  int rows(int live, int limit) const;

  void use(bool on) { on_ = on; }
  // At most `max_graphs` recordings are kept (0: none are made; every op runs op by op); extra ones are dropped.
  void limit(std::size_t max_graphs);
  // Recordings held now, and made so far (a shape dropped and recorded again counts again): both may be read from
  // another thread (lsserve's /metrics) while this one decodes.
  std::size_t graphs() const { return held_.load(std::memory_order_relaxed); }
  std::size_t recordings() const { return recordings_.load(std::memory_order_relaxed); }
  // The host seconds the recordings took (the decoding thread's own figure).
  double recording_seconds() const { return recording_seconds_; }
  // Replays, recordings and runs op by op (a shape's first uses, or recording off) with their host seconds, and the
  // decoding steps with their live and computed rows: where a fresh decoder's time goes (lstranslate --log-level
  // debug). The decoding thread's own figures.
  StepModel::RunCounts run_counts() const;

 private:
  struct Recording {
    std::unique_ptr<kernels::OpGraph> graph;
    uint64_t last_use = 0;  // uses_ when it last replayed
  };

  void drop_least_recent(std::size_t keep);  // until at most `keep` recordings are held

  kernels::Backend& backend_;
  bool on_ = true;
  std::size_t max_graphs_ = kMaxGraphs;
  std::map<Shape, Recording> graphs_;
  uint64_t uses_ = 0;
  std::atomic<std::size_t> held_{0}, recordings_{0};
  double recording_seconds_ = 0;
  std::size_t replays_ = 0, runs_op_by_op_ = 0;
  double op_by_op_seconds_ = 0;
  Shape last_{-1, -1, -1, -1};
  std::set<Shape> seen_;
  std::size_t steps_ = 0, live_rows_ = 0, computed_rows_ = 0;  // run_step's
};

// The position-origin tables, [rows][positions] int32 each (docs/decoding.md): entry [r][p] says which row's cache
// slices hold row r's key and value of position p. `origin` is what the steps read; `spare` what select() gathers
// into; `identity` ([r][p] = r) what reset() restores. Allocated by the owner's state layout (lay_out).
struct OriginTables {
  int32_t* origin = nullptr;
  int32_t* spare = nullptr;
  int32_t* identity = nullptr;
  int rows = 0, positions = 0;

  // Takes the three tables through take(bytes) (a counting pass may return null).
  template <typename Take>
  void lay_out(Take&& take, int table_rows, int table_positions) {
    rows = table_rows, positions = table_positions;
    const std::size_t bytes = static_cast<std::size_t>(rows) * positions * sizeof(int32_t);
    origin = static_cast<int32_t*>(take(bytes));
    spare = static_cast<int32_t*>(take(bytes));
    identity = static_cast<int32_t*>(take(bytes));
  }
  void upload_identity(kernels::Backend& backend) const;  // once, after allocation
  void reset(kernels::Backend& backend) const;            // every row reads its own slices again (start())
  // Hypothesis j < n continues parents[j] (device array): origin_new[j][p] = origin[parents[j]][p] for the first
  // `filled` positions, gathered into the spare table and copied back (recorded steps read `origin` at its address).
  void reorder(kernels::Backend& backend, const int32_t* parents, int n, int filled) const;
};

}  // namespace lseq
