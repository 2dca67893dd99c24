#include "core/model/model.h"

#include "core/model/encoder_decoder_model.h"
#include "core/model/lm/decoder_only_model.h"
#include "util/error.h"

namespace lseq {

Model::Model(const ModelConfig& config, kernels::Backend& backend) : config_(config), backend_(backend) {}

Model::~Model() = default;

void Model::set_store(ParamTable table, kernels::DType compute_dt, ParamUse use, std::size_t out_of_order_end) {
  store_ = std::make_unique<ParamStore>(std::move(table), backend_, compute_dt, use);
  out_of_order_end_ = out_of_order_end;
}

void Model::set_recompute_ffn(bool on) {
  if (on == recompute_ffn_) return;
  recompute_ffn_ = on;
  step_bytes_.clear();
}

void Model::set_gradients_in_step_memory(bool on, bool sum_steps) {
  if (on == store_->grads_in_step_memory() && sum_steps == store_->sums_steps()) return;
  store_->set_grads_in_step_memory(on, out_of_order_end_, sum_steps);
  step_bytes_.clear();
}

std::size_t Model::step_bytes(const data::Batch& b, bool training) const {
  const auto key = std::make_tuple(b.size, b.src_len, b.tgt_len, !b.doc_starts.empty(), training);
  auto found = step_bytes_.find(key);
  if (found != step_bytes_.end()) return found->second;
  const std::size_t measured = measure_bytes(b, training);
  step_bytes_.emplace(key, measured);
  return measured;
}

StepLoss Model::forward_backward(const data::Batch& batch, uint64_t seed, uint64_t step, float grad_scale,
                                 kernels::Workspace& ws) {
  if (!store_->trainable()) fail("internal error: a model loaded for inference has no gradients to train");
  check_batch(batch);
  StepRun how;
  how.train = how.backward = true;
  how.seed = seed, how.step = step;
  how.grad_scale = grad_scale;
  if (gradients_ready_) how.ready = &gradients_ready_;
  ws.reset();
  ws.ensure(step_bytes(batch, true));
  const StepLoss loss = run_step(batch, ws, how, nullptr, nullptr);
  if (store_->sums_steps()) store_->add_step_grads();
  return loss;
}

StepLoss Model::forward_loss(const data::Batch& batch, kernels::Workspace& ws, std::vector<double>* sentence_nll) {
  check_batch(batch);
  ws.reset();
  ws.ensure(step_bytes(batch, false));
  return run_step(batch, ws, StepRun{}, sentence_nll, nullptr);
}

std::vector<float> Model::forward_logits(const data::Batch& batch, kernels::Workspace& ws) {
  check_batch(batch);
  std::vector<float> logits;
  ws.reset();
  ws.ensure(step_bytes(batch, false));
  run_step(batch, ws, StepRun{}, nullptr, &logits);
  return logits;
}

std::unique_ptr<Model> make_model(const ModelConfig& config, kernels::Backend& backend, kernels::DType compute_dt,
                                  ParamUse use) {
  if (config.is_lm()) return std::make_unique<DecoderOnlyModel>(config, backend, compute_dt, use);
  return std::make_unique<EncoderDecoderModel>(config, backend, compute_dt, use);
}

}  // namespace lseq
