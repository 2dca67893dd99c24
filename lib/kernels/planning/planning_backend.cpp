// The planning backend: every op a no-op, so a step run over it only records what it asks of the workspace.
#include "kernels/planning/planning_backend.h"

#include "util/error.h"

namespace lseq::kernels {
namespace {

class PlanningBackend final : public Backend {
 public:
  DeviceKind kind() const override { return DeviceKind::cpu; }
  std::string name() const override { return "null (planning)"; }
  void* allocate(std::size_t) override { fail("internal error: the planning backend cannot allocate"); }
  void release(void*) override {}
  void copy_to_device(void*, const void*, std::size_t) override {}
  void copy_to_host(void*, const void*, std::size_t) override {}
  int download_async(const void*, std::size_t) override { return 0; }
  void collect_download(int, void*, std::size_t) override {}
  void copy(void*, const void*, std::size_t) override {}
  void synchronize() override {}
  void fill(DType, void*, std::size_t, float) override {}
  void add(DType, const void*, const void*, std::size_t, void*) override {}
  void scale(DType, const void*, std::size_t, float, void*) override {}
  void cast(DType, const void*, DType, void*, std::size_t) override {}
  void reduce_sum(const float*, std::size_t, float*, bool) override {}
  void dropout(DType, const void*, std::size_t, const Dropout&, void*) override {}
  void gather_rows(DType, const void*, int64_t, const int32_t*, int, int64_t, void*, int64_t, const int32_t*) override {}
  void gemm(const GemmArgs&) override {}
  void linear_bias_forward(DType, const void*, const void*, const void*, int, int, int, BiasActivation, void*,
                           int) override {}
  void embedding_forward(DType, const int32_t*, int, int, const void*, int, float, const void*, const Dropout&,
                         void*) override {}
  void embedding_backward(DType, const int32_t*, int, int, int, float, const Dropout&, const void*, float*,
                          float*) override {}
  void add_bias(DType, const void*, const void*, int, int, void*) override {}
  void bias_grad(DType, const void*, int, int, float*, int) override {}
  void bias_activation_dropout_forward(DType, const void*, const void*, int, int, Activation, const Dropout&,
                                       void*) override {}
  void bias_activation_dropout_backward(DType, const void*, const void*, const void*, int, int, Activation,
                                        const Dropout&, void*, float*) override {}
  void bias_dropout_residual_forward(DType, const void*, const void*, const void*, int, int, const Dropout&,
                                     void*) override {}
  void bias_dropout_residual_backward(DType, const void*, int, int, const Dropout&, void*, float*) override {}
  void residual_layer_norm_forward(DType, const void*, const void*, const void*, int, int, const Dropout&, const void*,
                                   const void*, float, void*, void*, float*, float*) override {}
  void layer_norm_forward(DType, const void*, const void*, const void*, int, int, float, void*, float*,
                          float*) override {}
  void layer_norm_backward(DType, const void*, const void*, const float*, const float*, const void*, int, int, void*,
                           float*, float*, bool) override {}
  void layer_norm_backward_from_output(DType, const void*, const void*, const void*, const float*, const void*, int,
                                       int, void*, float*, float*) override {}
  void residual_layer_norm_backward(DType, const void*, const void*, const void*, const float*, const void*, int, int,
                                    const Dropout&, void*, void*, float*, float*, float*) override {}
  void split_heads(DType, const void*, const void*, int, int, int, int, int, int, void*) override {}
  void merge_heads(DType, const void*, int, int, int, int, int, int, void*, float*) override {}
  void attention_softmax_forward(DType, const void*, const int32_t*, int, int, int, int, int, float, bool, void*,
                                 const int32_t*) override {}
  void attention_softmax_backward(DType, const void*, const void*, int, int, int, float, void*) override {}
  void split_step_qkv(DType, const void*, const void*, int, int, int, void*, void*, const int32_t*) override {}
  void attention_step(DType, const void*, const void*, const void*, int64_t, const int32_t*, const int32_t*, int,
                      const int32_t*, int, int, int, int, float, void*, const int32_t*) override {}
  void attention_forward(DType, const void*, int, const void*, const void*, int, const int32_t*, int, int, int, int,
                         int, float, bool, void*, float*, const int32_t*, const int32_t*, const Dropout&) override {}
  void attention_backward(DType, const void*, int, const void*, const void*, int, const int32_t*, int, int, int, int,
                          int, float, bool, const float*, const void*, const void*, void*, void*, void*, const int32_t*,
                          const int32_t*, const Dropout&) override {}
  void cross_entropy(DType, const void*, const void*, const int32_t*, int, int, float, int, float, float*, float*,
                     void*, int) override {}
  void log_softmax(DType, const void*, int, int, float*, int) override {}
  void topk_log_softmax(DType, const void*, int, int, int, int, int, float*, int32_t*, float*, int) override {}
  void draw_topk(const float*, const int32_t*, const float*, int, int, int32_t, double, uint64_t*, int32_t*, int32_t*,
                 float*) override {}
  void grad_norm(const float*, std::size_t, float, float, float*, float*) override {}
  void adam_update(float*, const float*, float*, float*, std::size_t, const AdamArgs&, const float*, DType,
                   void*) override {}
};

}  // namespace

std::unique_ptr<Backend> make_planning_backend() { return std::make_unique<PlanningBackend>(); }

}  // namespace lseq::kernels
