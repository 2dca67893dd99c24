#pragma once
// The CUDA backend: the kernel API on one GPU, in fp32, fp16 or bf16 storage with fp32 math. Every op runs in the
// backend's own stream; cuBLAS, cuBLASLt and the backend's scratch (reduction partials, batched-GEMM pointer arrays)
// are created once here, so no op allocates. The ops are defined by family in the *_cuda.cu/.cpp files beside this
// header, each checking its launches (an error names the op and CUDA's message).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <string>
#include <tuple>

#include "kernels/backend.h"

namespace lseq::kernels {

namespace cuda {
inline cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
  }
  return CUDA_R_32F;
}
}  // namespace cuda

class CudaBackend : public Backend {
 public:
  // allow_tf32: let fp32 GEMMs use TF32 tensor cores (faster, ~1e-3 relative error); off keeps fp32 parity with
  // the CPU backend.
  explicit CudaBackend(int device, bool allow_tf32 = false);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  DeviceKind kind() const override { return DeviceKind::cuda; }
  std::string name() const override { return name_; }

  void* allocate(std::size_t bytes) override;
  void release(void* p) override;
  void copy_to_device(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  int download_async(const void* src, std::size_t bytes) override;
  void collect_download(int slot, void* host_dst, std::size_t bytes) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void synchronize() override;

  // A CUDA graph captured from the backend's stream (graph_cuda.cpp).
  std::unique_ptr<OpGraph> record(const std::function<void()>& ops) override;
  bool can_record() const override { return true; }
  void set_matmul_row_class_growth(int growth) override;

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

  // Bytes of the backend's own scratch: reduction partials and the pointer arrays of indexed batched GEMMs.
  static constexpr std::size_t kScratchBytes = std::size_t(16) << 20;
  static constexpr std::size_t kCublasWorkspaceBytes = std::size_t(32) << 20;
  // Small host-to-device copies (a batch's ids, a decoding step's tokens) go through a ring of pinned staging
  // slots and return without waiting for the GPU: the host keeps queueing work instead of draining the stream
  // at every upload. A slot is reused only after its previous copy has completed (its event).
  static constexpr int kUploadSlots = 4;
  static constexpr std::size_t kUploadSlotBytes = std::size_t(1) << 20;
  // Small device-to-host copies (a decoding step's top-k) land in pinned memory first: a copy into pageable memory
  // goes through the driver's own bounce buffer, which adds latency to every step the host waits for.
  static constexpr std::size_t kDownloadBytes = std::size_t(1) << 20;

 private:
  void release_resources() noexcept;
  void bind() const;  // makes this backend's GPU current for the calling thread
  // attention_forward/backward over slices longer than the whole-slice kernels take (tiled_attention_cuda.cu).
  void tiled_attention_forward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                               const int32_t* k_lengths, int batch, int heads, int q_len, int k_len, int head_dim,
                               float scale, bool causal, void* context, float* lse, const int32_t* q_offsets,
                               const int32_t* k_offsets, const Dropout& drop);
  void tiled_attention_backward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                                const int32_t* k_lengths, int batch, int heads, int q_len, int k_len, int head_dim,
                                float scale, bool causal, const float* lse, const void* context,
                                const void* d_context, void* d_q, void* d_k, void* d_v, const int32_t* q_offsets,
                                const int32_t* k_offsets, const Dropout& drop);
  // Throws naming the op when the last launch failed.
  void check_launch(const char* op) const;
  float* scratch_floats() const { return static_cast<float*>(scratch_); }
  std::size_t scratch_float_count() const { return kScratchBytes / sizeof(float); }
  // acc[c] += sum over rows of the partials [chunks, cols] written by a column-reduction kernel (fixed order).
  void finish_column_sums(const float* partials, int chunks, int cols, float* acc, const char* op);
  // The LayerNorm backwards: xhat from the input `values` with `mean`, or from the output with `beta` (non-null);
  // with `d_o` also residual_layer_norm_backward's dropout tail.
  void layer_norm_backward_saved(DType dt, const void* values, const float* mean, const void* beta, const void* gamma,
                                 const float* rstd, const void* dy, int rows, int cols, void* dx, bool accumulate,
                                 float* dparam_gamma, float* dparam_beta, const Dropout* drop, void* d_o,
                                 float* dparam_bias, const char* op);

  // cuBLASLt matmuls (matmul_plans_cuda.cpp): the column-major product out (n x m) = op(first) (n x k)
  // op(second) (k x m), which is a row-major product with its operands swapped. A plan (descriptor, layouts,
  // algorithm) per shape and alignment; the algorithm chosen once per class of row counts m.
  enum class MatmulEpilogue { none, bias, relu_bias, gelu_bias };
  struct MatmulKey {
    DType ab = DType::f32, c_type = DType::f32;
    bool trans_first = false, trans_second = false;
    int m = 0, n = 0, k = 0, ld_first = 0, ld_second = 0, ld_out = 0;
    int align = 1;  // bytes every operand's pointer and rows are aligned to
    MatmulEpilogue epilogue = MatmulEpilogue::none;
    auto tied() const {
      return std::tie(ab, c_type, trans_first, trans_second, m, n, k, ld_first, ld_second, ld_out, align, epilogue);
    }
    bool operator<(const MatmulKey& other) const { return tied() < other.tied(); }
  };
  struct MatmulPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
    cublasLtMatmulAlgo_t algo{};
    void release() noexcept;  // destroys what was made, leaves an empty plan
  };
  static constexpr std::size_t kMaxMatmulPlans = 4096;  // then all are dropped and made again as shapes recur
  const MatmulPlan& matmul_plan(const MatmulKey& key, const void* bias);
  MatmulPlan describe_matmul(const MatmulKey& key, const void* bias) const;
  bool heuristic_algo(const MatmulKey& key, const MatmulPlan& plan, cublasLtMatmulAlgo_t& algo) const;
  [[noreturn]] void fail_matmul(const MatmulKey& key, const char* call, cublasStatus_t status) const;
  void run_matmul(const MatmulPlan& plan, float alpha, const void* first, const void* second, float beta, void* out);
  void single_gemm(const GemmArgs& g);  // gemm() of one product, through a plan
  void release_matmul_plans() noexcept;
  // Pays cuBLASLt's one-time set-up at construction, where a program loading a model overlaps it with reading
  // the weights, rather than at the first product.
  void warm_up_matmuls();
  int row_class(int m) const;

  int device_ = 0;
  int sm_count_ = 1;  // the GPU's multiprocessors, for kernels whose best shape depends on how many rows fill it
  bool allow_tf32_ = false;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublas_lt_ = nullptr;  // shares cublas_workspace_ (same stream: stream-ordered)
  std::map<MatmulKey, MatmulPlan> matmul_plans_;
  std::map<MatmulKey, cublasLtMatmulAlgo_t> class_algos_;  // keyed by the class's row count
  int row_class_growth_ = 2;                               // set_matmul_row_class_growth
  void* cublas_workspace_ = nullptr;
  void* scratch_ = nullptr;
  char* upload_staging_ = nullptr;  // pinned, kUploadSlots x kUploadSlotBytes
  char* download_staging_ = nullptr;  // pinned, kDownloadBytes
  cudaEvent_t upload_done_[kUploadSlots] = {};
  int upload_next_ = 0;
  char* async_download_staging_ = nullptr;  // pinned, kAsyncDownloadSlots x kAsyncDownloadBytes
  cudaEvent_t async_download_done_[kAsyncDownloadSlots] = {};
  int async_download_next_ = 0;
};

}  // namespace lseq::kernels
