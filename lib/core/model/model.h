#pragma once
// What the trainer, the validator, checkpoints and lstrain need of a model, whichever its type (--type): the
// encoder-decoder Transformer (EncoderDecoderModel) or a decoder-only language model (DecoderOnlyModel). One flat
// parameter store, explicit forward and backward of one batch, activations from a workspace planned over the planning
// backend. Calls through this interface are per step (a few an update); each model runs its layers directly, so no
// op goes through a virtual call of its own.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "core/model/model_config.h"
#include "core/model/params.h"
#include "data/batch.h"
#include "kernels/backend.h"
#include "kernels/workspace.h"

namespace lseq {

struct StepLoss {
  double loss_sum = 0;        // label-smoothed loss summed over target tokens
  double nll_sum = 0;         // -log p(reference) summed over target tokens
  int64_t target_tokens = 0;  // real target tokens (eos included)
};

class Model {
 public:
  virtual ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  const std::vector<ParamInfo>& params() const { return store_->table().list(); }
  // Elements of the flat buffers (what the optimizer and all-reduce run over). Tensors start at multiples of
  // kParamAlignment, so this includes small zero gaps; num_weights() counts the parameters proper.
  std::size_t num_params() const { return store_->size(); }
  std::size_t num_weights() const { return store_->table().count(); }
  float* master() { return store_->master(); }
  float* grads() { return store_->grads(); }
  kernels::DType compute_dtype() const { return store_->working_dtype(); }
  const ParamStore& param_store() const { return *store_; }
  ParamStore& param_store() { return *store_; }
  kernels::Backend& backend() const { return backend_; }

  void init_params(uint64_t seed) { store_->init(seed); }
  std::vector<float> initial_params(uint64_t seed) const { return store_->initial_values(seed); }
  // Master weights from host values (the ParamTable layout), working copy refreshed: loading a checkpoint.
  void load_params(const std::vector<float>& host) { store_->upload(host); }
  void load_params(const std::vector<HostTensor>& tensors) { store_->upload(tensors); }
  void zero_grads() { store_->zero_grads(); }

  // --recompute-ffn: training steps keep no feed-forward hidden activations and recompute them in backward (less
  // workspace for one more matrix product per block; the gradients are the same). Forgets the measured step sizes.
  void set_recompute_ffn(bool on);
  bool recompute_ffn() const { return recompute_ffn_; }

  // Gradients in step memory (StepGradients): each forward_backward writes the gradients of its batch alone
  // (instead of accumulating) into its workspace, where backward places them in the room of the activations it
  // has released; grads() then points there until the workspace is used again, so the optimizer must step before
  // the next forward pass of any kind. Less memory for updates of one batch (lstrain without --optimizer-delay);
  // off (the default) keeps a gradient buffer of the model's own. Forgets the measured step sizes.
  // sum_steps (with on): updates of several batches (--optimizer-delay in one process) add each batch's complete
  // gradients to a sum the model keeps (ParamStore::add_step_grads), which grads() then returns: the sum data
  // parallelism forms over ranks, in the same order.
  void set_gradients_in_step_memory(bool on, bool sum_steps = false);
  bool gradients_in_step_memory() const { return store_->grads_in_step_memory(); }

  // Data parallelism: during forward_backward's backward, `ready(first)` is called each time the gradients of every
  // tensor from table offset `first` to the end of the flat buffer are final for this batch: at the start of each
  // residual block's backward for the blocks above (decreasing offsets), and last with 0 once the embeddings are
  // done (they get gradients out of order: tied output weights), so that reducing them can start while backward
  // goes on. The kernels that wrote them have been issued, not necessarily run: the callee orders its work after
  // the backend's stream (a Communicator does). An empty function turns the calls off.
  using GradientsReady = std::function<void(std::size_t first)>;
  void set_gradients_ready(GradientsReady ready) { gradients_ready_ = std::move(ready); }

  // Workspace bytes for batches of up to max_tokens padded tokens per side (batch * padded length) and sentences
  // of up to max_len tokens (bos/eos included), training included. Measured by running the step's own code over
  // the planning backend, so it cannot drift from what the step takes. training = false plans for forward_loss
  // only.
  virtual std::size_t workspace_bytes(int64_t max_tokens, int max_len, bool training = true) const = 0;
  // Workspace bytes for exactly this batch's shape (measured the same way, remembered per shape). The forward
  // functions below grow `ws` to this before they run, so a workspace may start small and follow the batches,
  // as a caching allocator would, instead of holding the worst case from the start.
  std::size_t step_bytes(const data::Batch& batch, bool training) const;

  // Forward + backward of one batch. Parameter gradients ACCUMULATE grad_scale * d(sum of label-smoothed token
  // losses) (with gradients in step memory: are set to it); returns the batch's loss sums. Dropout keys from
  // (seed, step). Resets `ws`, grows it if this batch needs more (Workspace::ensure), and uses it.
  StepLoss forward_backward(const data::Batch& batch, uint64_t seed, uint64_t step, float grad_scale,
                            kernels::Workspace& ws);
  // Forward only, without dropout (validation, scoring). sentence_nll (if not null) receives one nll sum per
  // sentence (row) of the batch, in batch order.
  StepLoss forward_loss(const data::Batch& batch, kernels::Workspace& ws, std::vector<double>* sentence_nll = nullptr);
  // Forward only, without dropout: the output layer's logits [batch.size * tgt_len, tgt_vocab] on the host, padding
  // positions included (tests of incremental decoding compare against it), converted to fp32 in any precision.
  std::vector<float> forward_logits(const data::Batch& batch, kernels::Workspace& ws);

 protected:
  // The model validates its config and lays out its table before it calls set_store.
  Model(const ModelConfig& config, kernels::Backend& backend);
  // out_of_order_end: the table offset below which backward writes gradients out of order (the embedding tables:
  // tied output weights, StepGradients' side buffer).
  void set_store(ParamTable table, kernels::DType compute_dt, ParamUse use, std::size_t out_of_order_end);
  // The workspace bytes one step over this batch takes: the step's own code run over the planning backend.
  virtual std::size_t measure_bytes(const data::Batch& batch, bool training) const = 0;

  // How one step runs: training (dropout) and backward, the dropout keys, the gradients' factor and hook.
  struct StepRun {
    bool train = false, backward = false;
    uint64_t seed = 0, step = 0;
    float grad_scale = 1.0f;
    const GradientsReady* ready = nullptr;  // forward_backward's hook, if any
  };
  // Throws lseq::Error (or fails internally) for a batch this model cannot take.
  virtual void check_batch(const data::Batch& batch) const = 0;
  // One step over `batch` on the model's backend in `ws` (reset and grown by the caller); sentence_nll and logits
  // as forward_loss and forward_logits describe them (nullptr: not wanted).
  virtual StepLoss run_step(const data::Batch& batch, kernels::Workspace& ws, const StepRun& how,
                            std::vector<double>* sentence_nll, std::vector<float>* logits) = 0;

  ModelConfig config_;
  kernels::Backend& backend_;
  std::unique_ptr<ParamStore> store_;
  bool recompute_ffn_ = false;
  GradientsReady gradients_ready_;

 private:
  std::size_t out_of_order_end_ = 0;
  // (sentences, source length, target length, document masks, training)
  mutable std::map<std::tuple<int, int, int, bool, bool>, std::size_t> step_bytes_;
};

// The model of config.type: an EncoderDecoderModel or a DecoderOnlyModel (core/model/lm/decoder_only_model.h).
// compute_dt: the activations' and working weights' type (--precision); not part of the model config, so a model
// trained in one precision runs in any other. Master weights and gradients are fp32 regardless. ParamUse::inference
// (decoding, scoring) allocates neither gradients nor, in 16 bits, fp32 master weights: such a model runs forward
// only.
std::unique_ptr<Model> make_model(const ModelConfig& config, kernels::Backend& backend,
                                  kernels::DType compute_dt = kernels::DType::f32, ParamUse use = ParamUse::training);

}  // namespace lseq
