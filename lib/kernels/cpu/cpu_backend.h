#pragma once
// The CPU backend: plain, correct implementations of the kernel API in fp32 (OpenBLAS for GEMM, OpenMP over
// rows elsewhere). It is the oracle the CUDA backend's tests compare against, and what CI runs. The ops are
// defined by family in the *_cpu.cpp files beside this header.
#include <vector>

#include "kernels/backend.h"

namespace lseq::kernels {

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(int threads = 0);  // 0: all cores
  int threads() const { return threads_; }

  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string name() const override;

  void* allocate(std::size_t bytes) override;
  void release(void* p) override;
  void copy_to_device(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  int download_async(const void* src, std::size_t bytes) override;
  void collect_download(int slot, void* host_dst, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void synchronize() override {}

  void fill(DType dt, void* x, std::size_t n, float value) override;
  void add(DType dt, const void* a, const void* b, std::size_t n, void* y) override;
  void scale(DType dt, const void* x, std::size_t n, float alpha, void* y) override;
  void cast(DType src_dt, const void* src, DType dst_dt, void* dst, std::size_t n) override;
  void reduce_sum(const float* x, std::size_t n, float* out, bool accumulate) override;
  void dropout(DType dt, const void* x, std::size_t n, const Dropout& drop, void* y) override;
  void gather_rows(DType dt, const void* src, int64_t src_stride, const int32_t* index, int rows, int64_t row_elems,
                   void* dst, int64_t dst_stride, const int32_t* dst_index) override;

  void gemm(const GemmArgs& args) override;

  void linear_bias_forward(DType dt, const void* x, const void* w, const void* bias, int rows, int k, int n,
                           BiasActivation act, void* y, int ld_y = 0) override;

  void embedding_forward(DType dt, const int32_t* tokens, int batch, int len, const void* table, int dim, float scale,
                         const void* positions, const Dropout& drop, void* out) override;
  void embedding_backward(DType dt, const int32_t* tokens, int batch, int len, int dim, float scale,
                          const Dropout& drop, const void* dout, float* dparam_table, float* dparam_positions) override;

  void add_bias(DType dt, const void* x, const void* bias, int rows, int cols, void* y) override;
  void bias_grad(DType dt, const void* dy, int rows, int cols, float* dparam_bias, int ld = 0) override;
  void bias_activation_dropout_forward(DType dt, const void* x, const void* bias, int rows, int cols, Activation act,
                                       const Dropout& drop, void* y) override;
  void bias_activation_dropout_backward(DType dt, const void* x, const void* bias, const void* dy, int rows, int cols,
                                        Activation act, const Dropout& drop, void* dx, float* dparam_bias) override;
  void bias_dropout_residual_forward(DType dt, const void* x, const void* bias, const void* residual, int rows,
                                     int cols, const Dropout& drop, void* y) override;
  void bias_dropout_residual_backward(DType dt, const void* dy, int rows, int cols, const Dropout& drop, void* dx,
                                      float* dparam_bias) override;

  void residual_layer_norm_forward(DType dt, const void* x, const void* bias, const void* residual, int rows, int cols,
                                   const Dropout& drop, const void* gamma, const void* beta, float eps, void* sum,
                                   void* y, float* mean, float* rstd) override;
  void layer_norm_forward(DType dt, const void* x, const void* gamma, const void* beta, int rows, int cols, float eps,
                          void* y, float* mean, float* rstd) override;
  void layer_norm_backward(DType dt, const void* x, const void* gamma, const float* mean, const float* rstd,
                           const void* dy, int rows, int cols, void* dx, float* dparam_gamma, float* dparam_beta,
                           bool accumulate_dx) override;
  void layer_norm_backward_from_output(DType dt, const void* y, const void* gamma, const void* beta,
                                       const float* rstd, const void* dy, int rows, int cols, void* dx,
                                       float* dparam_gamma, float* dparam_beta) override;
  void residual_layer_norm_backward(DType dt, const void* y, const void* gamma, const void* beta, const float* rstd,
                                    const void* dy, int rows, int cols, const Dropout& drop, void* ds, void* d_o,
                                    float* dparam_gamma, float* dparam_beta, float* dparam_bias) override;

  void split_heads(DType dt, const void* qkv, const void* bias, int batch, int len, int padded_len, int heads,
                   int head_dim, int parts, void* out) override;
  void merge_heads(DType dt, const void* in, int batch, int len, int padded_len, int heads, int head_dim, int parts,
                   void* out, float* dparam_bias) override;
  void attention_softmax_forward(DType dt, const void* scores, const int32_t* k_lengths, int batch, int heads,
                                 int q_len, int k_len, int ld, float scale, bool causal, void* probs,
                                 const int32_t* key_starts = nullptr) override;
  void attention_softmax_backward(DType dt, const void* probs, const void* dprobs, int rows, int k_len, int ld,
                                  float scale, void* dscores) override;
  void split_step_qkv(DType dt, const void* qkv, const void* bias, int rows, int heads, int head_dim, void* q,
                      void* cache, const int32_t* append_dst) override;
  void attention_step(DType dt, const void* q, const void* k, const void* v, int64_t slice_stride,
                      const int32_t* kv_index, const int32_t* origin, int origin_stride, const int32_t* k_lengths,
                      int rows, int heads, int head_dim, int k_len, float scale, void* context,
                      const int32_t* key_starts = nullptr) override;
  void attention_forward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                         const int32_t* k_lengths, int batch, int heads, int q_len, int k_len, int head_dim,
                         float scale, bool causal, void* context, float* lse, const int32_t* q_offsets = nullptr,
                         const int32_t* k_offsets = nullptr, const Dropout& drop = Dropout{}) override;
  void attention_backward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                          const int32_t* k_lengths, int batch, int heads, int q_len, int k_len, int head_dim,
                          float scale, bool causal, const float* lse, const void* context, const void* d_context,
                          void* d_q, void* d_k, void* d_v, const int32_t* q_offsets = nullptr,
                          const int32_t* k_offsets = nullptr, const Dropout& drop = Dropout{}) override;

  void cross_entropy(DType dt, const void* logits, const void* bias, const int32_t* targets, int n, int vocab,
                     float label_smoothing, int ignore_index, float grad_scale, float* loss, float* nll,
                     void* dlogits, int ld = 0) override;

  void log_softmax(DType dt, const void* logits, int rows, int cols, float* out, int ld = 0) override;
  void topk_log_softmax(DType dt, const void* logits, int rows, int cols, int k, int first_allowed_id, int eos_id,
                        float* values, int32_t* ids, float* eos_log_prob, int ld = 0) override;
  void draw_topk(const float* values, const int32_t* ids, const float* eos_log_probs, int rows, int k, int32_t eos_id,
                 double temperature, uint64_t* streams, int32_t* remaining, int32_t* tokens,
                 float* token_log_probs) override;

  void grad_norm(const float* grads, std::size_t n, float pre_scale, float max_norm, float* norm,
                 float* factor) override;
  void adam_update(float* params, const float* grads, float* m, float* v, std::size_t n, const AdamArgs& args,
                   const float* factor, DType working_dt, void* working) override;

 private:
  int threads_ = 1;
  // download_async's slots: the copy is made at once, collect_download copies it out.
  std::vector<std::vector<unsigned char>> download_slots_ =
      std::vector<std::vector<unsigned char>>(kAsyncDownloadSlots);
  int download_next_ = 0;
};

}  // namespace lseq::kernels
