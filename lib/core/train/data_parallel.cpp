#include "core/train/data_parallel.h"

#include <spdlog/spdlog.h>

#include "util/error.h"

namespace lseq {

DataParallel::DataParallel(Model& model, kernels::Communicator* comm, GradientSyncOptions sync)
    : model_(model), comm_(comm) {
  if (comm_ && comm_->size() > 1) {
    sync_ = std::make_unique<GradientSync>(model.backend(), *comm_, model.num_params(), std::move(sync));
    // Gradients the store keeps between steps are exchanged from the communicator's window where it has one (all
    // ranks take the same branch: the choice of step memory follows the same options everywhere).
    if (!model.gradients_in_step_memory()) {
      window_ = static_cast<float*>(comm_->allocate_window(model.num_params() * sizeof(float)));
      if (window_) {
        model.param_store().place_grads(window_);
        spdlog::info("gradients kept in a window of {} ({:.1f} MiB): the exchange reads the other ranks' memory",
                     comm_->name(), static_cast<double>(model.num_params()) * 4 / 1048576.0);
      }
    }
  }
}

DataParallel::~DataParallel() {
  model_.set_gradients_ready(nullptr);
  if (!window_) return;
  // The window first, then the store's own buffer again: both at once might not fit at the end of a run.
  try {
    comm_->release_window(window_);
    model_.param_store().place_grads(nullptr);
  } catch (const std::exception& e) {
    spdlog::debug("after data parallelism the model keeps no gradient buffer: {}", e.what());
  }
}

void DataParallel::arm() {
  if (!sync_) return;
  GradientSync* sync = sync_.get();
  Model* model = &model_;
  model_.set_gradients_ready([sync, model](std::size_t first) { sync->ready(model->grads(), first); });
}

void DataParallel::finish() {
  if (!sync_) return;
  model_.set_gradients_ready(nullptr);
  sync_->finish(model_.grads());
}

DataParallel::Totals DataParallel::sum(const Totals& mine) {
  if (!comm_) return mine;
  std::vector<double> v = {mine.loss_sum, mine.nll_sum, mine.target_tokens, mine.sentences, mine.stop ? 1.0 : 0.0};
  comm_->sum_host(v);
  Totals t;
  t.loss_sum = v[0];
  t.nll_sum = v[1];
  t.target_tokens = v[2];
  t.sentences = v[3];
  t.stop = v[4] > 0;
  return t;
}

std::map<std::string, double> DataParallel::from_rank0(const std::map<std::string, double>& values) {
  if (!comm_) return values;
  std::vector<double> v;
  for (const auto& kv : values) v.push_back(comm_->rank() == 0 ? kv.second : 0.0);
  comm_->sum_host(v);
  std::map<std::string, double> out;
  std::size_t i = 0;
  for (const auto& kv : values) out[kv.first] = v[i++];
  return out;
}

void DataParallel::check_same_start(int64_t update) {
  if (!comm_) return;
  std::vector<double> v = {comm_->rank() == 0 ? static_cast<double>(update) : 0.0};
  comm_->sum_host(v);
  const auto rank0 = static_cast<int64_t>(v[0]);
  if (rank0 == update) return;
  auto start = [](int64_t u) {
    return u < 0 ? std::string("starts afresh") : fmt::format("resumes from the checkpoint of update {}", u);
  };
  fail("rank {} {} but rank 0 {}: on several machines the model directory (with --vocabs and --cache-dir) must be "
       "on a filesystem that every machine sees", comm_->rank(), start(update), start(rank0));
}

double DataParallel::comm_wait_seconds() const { return comm_ ? comm_->waited_seconds() : 0.0; }

}  // namespace lseq
