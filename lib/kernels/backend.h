#pragma once
// The kernel API: every op lseq's layers call, declared once. Two backends implement it: cpu/ (the plain,
// correct reference, the oracle of the GPU tests) and cuda/ (fused kernels). Layers call only this interface.
//
// Conventions, shared by every op:
// - Pointers are raw device pointers of the backend (host memory for the CPU backend). Row-major layouts.
// - `dt` is the element type of activations and working weights (fp32 now; fp16/bf16 on the CUDA backend).
//   Parameter gradients, optimizer state, LayerNorm statistics and losses are always fp32 (float*).
// - Parameter-gradient outputs (names starting with `dparam_`/ending in `_acc`) ACCUMULATE (+=), so gradients of
//   several micro-batches (--optimizer-delay) and of tied weights add up; the trainer zeroes them per update.
//   Activation-gradient outputs are overwritten.
// - Ops run in the backend's stream, in order; none allocates memory or synchronises with the host, except the
//   memory and copy functions at the top. Scratch memory, where an op needs some, is passed in.
// - Dropout is inverted dropout with masks from dropout_rng.h, recomputed in backward from the same key.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kernels/dtype.h"
#include "kernels/topk_order.h"

namespace lseq::kernels {

enum class DeviceKind { cpu, cuda };

enum class Activation { relu, gelu, swish };  // gelu is the tanh approximation

// What linear_bias_forward applies after its bias. gelu is for forward passes that no backward follows (decoding,
// validation): its gradient needs the pre-activation, which the fused product does not keep.
enum class BiasActivation { none, relu, gelu };

struct Dropout {
  float p = 0.0f;     // probability of dropping; 0 disables the op's dropout
  uint64_t key = 0;   // dropout_key(seed, step, site)
};

// C = alpha * op(A) op(B) + beta * C, row-major, op(X) = X or X^T. A is [m,k] after op, B is [k,n], C is [m,n].
// A and B have type `ab`, C has type `c` (fp32 C with bf16 A/B gives fp32 weight gradients). batch > 1 runs
// `batch` independent products whose operands start stride_* elements apart (attention heads). With index_b (a
// device array of `batch` entries) product i reads B at index_b[i] * stride_b instead of i * stride_b, so that
// many products share one operand (in decoding, the hypotheses of a sentence share its encoder keys/values).
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  int m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  const void* a = nullptr;
  int lda = 0;
  const void* b = nullptr;
  int ldb = 0;
  void* c = nullptr;
  int ldc = 0;
  DType ab = DType::f32, c_type = DType::f32;
  int batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  const int32_t* index_b = nullptr;
};

// Throws lseq::Error for a negative size, batch < 1, or a leading dimension shorter than its rows (both backends).
void check_gemm_shape(const GemmArgs& args);

// Throws lseq::Error for a negative size, head_dim outside [1, Backend::kMaxStepHeadDim], a slice_stride too
// short for k_len keys, both kv_index and origin given, or an origin_stride shorter than k_len (both backends,
// Backend::attention_step).
void check_attention_step_shape(int rows, int heads, int head_dim, int k_len, int64_t slice_stride,
                                const int32_t* kv_index, const int32_t* origin, int origin_stride);

// Throws lseq::Error for a negative batch or heads, lengths and head_dim that Backend::fused_attention_fits
// refuses, or row strides below heads*head_dim (both backends, Backend::attention_forward/backward).
void check_fused_attention_shape(const char* op, int batch, int heads, int q_len, int k_len, int head_dim, int ldq,
                                 int ldkv);

// Throws lseq::Error for dropout (drop.p > 0) at lengths where Backend::fused_attention_drops is false (both
// backends, Backend::attention_forward/backward: callers drop out composed there).
void check_fused_attention_dropout(const char* op, int q_len, int k_len, const Dropout& drop);

// The row stride of an op's rows of `row` elements: ld, or `row` when ld is 0; throws lseq::Error when ld is
// shorter than the row (both backends, Backend::cross_entropy and bias_grad).
int row_stride(const char* op, int ld, int row);

// Throws lseq::Error for a negative size or an inner size k < 1 (both backends, Backend::linear_bias_forward).
void check_linear_bias_shape(int rows, int k, int n);
// draw_topk's arguments: rows >= 0, 1 <= k <= kMaxTopK, a temperature above 0.
void check_draw_topk_args(int rows, int k, double temperature);

struct AdamArgs {
  float lr = 0.0f;
  float beta1 = 0.9f, beta2 = 0.98f, eps = 1e-9f;
  float weight_decay = 0.0f;  // decoupled (AdamW); 0 is plain Adam
  float bias_correction1 = 1.0f, bias_correction2 = 1.0f;  // 1 - beta^t, computed on the host
};

// A recorded sequence of ops (Backend::record) that replays them with the same arguments in one go: a CUDA graph
// on the GPU, where it removes the host's cost of issuing every op. The device memory the ops read may change
// between replays (that is how a replay gets new inputs); their arguments (pointers, sizes, scalars) may not.
class OpGraph {
 public:
  virtual ~OpGraph() = default;
  virtual void replay() = 0;  // in stream order, like any op
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceKind kind() const = 0;
  virtual std::string name() const = 0;  // e.g. "cpu (2 threads)", "cuda:0 NVIDIA H100"

  // ---- memory (the only calls that may allocate or synchronise) ----
  virtual void* allocate(std::size_t bytes) = 0;  // throws lseq::Error naming the size when it cannot
  virtual void release(void* p) = 0;
  virtual void copy_to_device(void* dst, const void* host_src, std::size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, std::size_t bytes) = 0;
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;  // device to device, in stream order
  virtual void synchronize() = 0;
  // A copy to the host that does not wait: queues `bytes` (at most kAsyncDownloadBytes) of device memory into one of
  // kAsyncDownloadSlots host slots, in stream order, and returns the slot at once; collect_download(slot, ...) waits
  // for that copy and copies it out. The slots are taken in turn: collect each before kAsyncDownloadSlots more are
  // queued. (What lets sampling queue the next decoding step before it reads this one's tokens.)
  static constexpr int kAsyncDownloadSlots = 4;
  static constexpr std::size_t kAsyncDownloadBytes = std::size_t(64) << 10;
  virtual int download_async(const void* src, std::size_t bytes) = 0;
  virtual void collect_download(int slot, void* host_dst, std::size_t bytes) = 0;

  // ---- recording ----
  // Records the ops that `ops` issues on this backend, without running them, and returns the recording; or returns
  // nullptr without calling `ops` where the backend cannot record (this default: the CPU backend's ops are plain
  // host calls, nothing to save). Inside `ops` only the ops below may be called, not the memory functions above.
  virtual std::unique_ptr<OpGraph> record(const std::function<void()>& ops) {
    (void)ops;
    return nullptr;
  }
  // Whether record() returns recordings (the decoders then pad steps to shapes that repeat; where it cannot,
  // padding would only add work).
  virtual bool can_record() const { return false; }
  // Which row counts share one GEMM algorithm (GPU only: the CPU has none to choose): those up to the same power of
  // `growth` times 8 (at least 8). Training keeps 2. A decoder meets many row counts (sentences x source lengths,
  // hypotheses), and each newly chosen cuBLAS kernel costs 2-9 ms of host time at its first launch in the process,
  // so decoders share an algorithm over wider classes and load fewer kernels (the model loader sets it).
  virtual void set_matmul_row_class_growth(int growth) { (void)growth; }

  // ---- elementwise ----
  virtual void fill(DType dt, void* x, std::size_t n, float value) = 0;
  // y = a + b (y may alias a or b)
  virtual void add(DType dt, const void* a, const void* b, std::size_t n, void* y) = 0;
  // y = alpha * x (y may alias x)
  virtual void scale(DType dt, const void* x, std::size_t n, float alpha, void* y) = 0;
  // dst = src converted between element types (f32 <-> f16/bf16, round to nearest even)
  virtual void cast(DType src_dt, const void* src, DType dst_dt, void* dst, std::size_t n) = 0;
  // out[0] = sum of x[0..n) (fp32, device scalar); added to out[0] when accumulate, else overwritten
  virtual void reduce_sum(const float* x, std::size_t n, float* out, bool accumulate) = 0;
  // y = dropout(x); also the backward (dx = dropout(dy) with the same key)
  virtual void dropout(DType dt, const void* x, std::size_t n, const Dropout& drop, void* y) = 0;
  // dst[o * dst_stride + e] = src[i * src_stride + e] with i = index[r] (index == nullptr: i = r) and
  // o = dst_index[r] (dst_index == nullptr: o = r), for r < rows, e < row_elems: a row gather (and scatter) that
  // also copies between strided layouts (decoding caches: reorder hypotheses, append a step's keys at a position
  // that only the device knows). Any dtype (a copy). dst must not overlap src; dst_index entries must differ.
  virtual void gather_rows(DType dt, const void* src, int64_t src_stride, const int32_t* index, int rows,
                           int64_t row_elems, void* dst, int64_t dst_stride, const int32_t* dst_index) = 0;

  // ---- matrix products ----
  virtual void gemm(const GemmArgs& args) = 0;

  // ---- a linear map with its bias (and activation) fused into the matrix product ----
  // y[rows, n] = act(x[rows, k] w^T + bias), with w [n, k] and bias [n] (type dt) and act none, relu or gelu: one
  // cuBLASLt product with a BIAS, RELU_BIAS or GELU_BIAS epilogue on the GPU, instead of a product and a pass over
  // its output. The bias (and activation) apply to the fp32 accumulator before the one rounding to dt. The
  // feed-forward block's backward needs no more than y after a ReLU: relu'(x w^T + bias) is y > 0
  // (bias_activation_dropout_backward over y with no bias). y's rows are ld_y apart (0: n).
  virtual void linear_bias_forward(DType dt, const void* x, const void* w, const void* bias, int rows, int k, int n,
                                   BiasActivation act, void* y, int ld_y = 0) = 0;

  // ---- embeddings ----
  // out[b,t,:] = dropout(table[tokens[b,t]] * scale + positions[t]) for b < batch, t < len.
  // table [vocab, dim]; positions [max_len, dim] or nullptr (sinusoidal or learned, the caller's choice).
  virtual void embedding_forward(DType dt, const int32_t* tokens, int batch, int len, const void* table,
                                 int dim, float scale, const void* positions, const Dropout& drop,
                                 void* out) = 0;
  // dparam_table[tokens[b,t]] += scale * dropout(dout[b,t]); dparam_positions[t] += dropout(dout[b,t]) if not null.
  virtual void embedding_backward(DType dt, const int32_t* tokens, int batch, int len, int dim, float scale,
                                  const Dropout& drop, const void* dout, float* dparam_table,
                                  float* dparam_positions) = 0;

  // ---- bias, activation, residual ----
  // y = x + bias (broadcast over rows), in place allowed
  virtual void add_bias(DType dt, const void* x, const void* bias, int rows, int cols, void* y) = 0;
  // dparam_bias += column sums of dy [rows, cols] (row stride ld; 0: cols)
  virtual void bias_grad(DType dt, const void* dy, int rows, int cols, float* dparam_bias, int ld = 0) = 0;
  // y = dropout(act(x + bias)); x is kept by the caller for backward
  virtual void bias_activation_dropout_forward(DType dt, const void* x, const void* bias, int rows, int cols,
                                               Activation act, const Dropout& drop, void* y) = 0;
  // dx = dropout(dy) * act'(x + bias); dparam_bias += column sums of dx; dx may be dy (in place)
  virtual void bias_activation_dropout_backward(DType dt, const void* x, const void* bias, const void* dy,
                                                int rows, int cols, Activation act, const Dropout& drop,
                                                void* dx, float* dparam_bias) = 0;
  // y = residual + dropout(x + bias); bias may be nullptr
  virtual void bias_dropout_residual_forward(DType dt, const void* x, const void* bias, const void* residual,
                                             int rows, int cols, const Dropout& drop, void* y) = 0;
  // dx = dropout(dy); dparam_bias += column sums of dx (if not null). The residual's gradient is dy itself.
  virtual void bias_dropout_residual_backward(DType dt, const void* dy, int rows, int cols, const Dropout& drop,
                                              void* dx, float* dparam_bias) = 0;

  // ---- LayerNorm over the last dimension ----
  // y = (x - mean) * rstd * gamma + beta; saves mean and rstd [rows] for backward (either may be nullptr when no
  // backward follows)
  virtual void layer_norm_forward(DType dt, const void* x, const void* gamma, const void* beta, int rows,
                                  int cols, float eps, void* y, float* mean, float* rstd) = 0;
  // The post-norm residual block's end in one op: s = residual + dropout(x + bias) (bias may be nullptr), rounded to
  // dt as bias_dropout_residual_forward writes it, then y = LayerNorm(s) as layer_norm_forward writes it. s goes to
  // `sum` when not null (LayerNorm's backward reads it); mean and rstd as in layer_norm_forward. Decoding passes
  // null for all three: the row never makes a round trip through memory. y may not alias x or residual; sum may be
  // residual (a pre-norm residual stream updated in place).
  virtual void residual_layer_norm_forward(DType dt, const void* x, const void* bias, const void* residual, int rows,
                                           int cols, const Dropout& drop, const void* gamma, const void* beta,
                                           float eps, void* sum, void* y, float* mean, float* rstd) = 0;
  // dx (overwritten, or with accumulate_dx added to: the pre-norm residual block's input gradient, the residual's
  // share already in dx, in one pass), dparam_gamma += sum dy*xhat, dparam_beta += sum dy
  virtual void layer_norm_backward(DType dt, const void* x, const void* gamma, const float* mean, const float* rstd,
                                   const void* dy, int rows, int cols, void* dx, float* dparam_gamma,
                                   float* dparam_beta, bool accumulate_dx) = 0;
  // The same from LayerNorm's output y instead of its input: xhat = (y - beta) / gamma, and only rstd is read. A
  // post-norm block then keeps no copy of its residual sum for backward (y is kept anyway: it is the next
  // sublayer's input). A gain nearer 0 than kMinBackwardGain divides as +-kMinBackwardGain: such a column's
  // xhat cannot be recovered from y, and is taken as (y - beta) / +-kMinBackwardGain instead of overflowing.
  static constexpr float kMinBackwardGain = 1e-6f;
  virtual void layer_norm_backward_from_output(DType dt, const void* y, const void* gamma, const void* beta,
                                               const float* rstd, const void* dy, int rows, int cols, void* dx,
                                               float* dparam_gamma, float* dparam_beta) = 0;
  // The post-norm residual block's backward start in one op: ds = layer_norm_backward_from_output(dy) (the
  // gradient of the block's input and of the sublayer's output, rounded to dt), then d_o = dropout(ds) and
  // dparam_bias += its column sums, as bias_dropout_residual_backward(ds) writes them. dparam_bias may be null.
  virtual void residual_layer_norm_backward(DType dt, const void* y, const void* gamma, const void* beta,
                                            const float* rstd, const void* dy, int rows, int cols,
                                            const Dropout& drop, void* ds, void* d_o, float* dparam_gamma,
                                            float* dparam_beta, float* dparam_bias) = 0;

  // ---- attention ----
  // qkv [batch*len, parts*heads*head_dim] (+ bias [parts*heads*head_dim] if not null) ->
  // out [parts][batch][heads][padded_len][head_dim]. parts = 3 for self-attention QKV, 2 for cross-attention KV, 1
  // for Q. padded_len >= len: rows t in [len, padded_len) of every slice are written as 0 (training pads the head
  // length to a multiple of 8 so that all attention GEMMs get aligned tensor-core kernels; decoding passes len).
  virtual void split_heads(DType dt, const void* qkv, const void* bias, int batch, int len, int padded_len,
                           int heads, int head_dim, int parts, void* out) = 0;
  // The inverse: in [parts][batch][heads][padded_len][head_dim] -> out [batch*len, parts*heads*head_dim]; the
  // padding rows [len, padded_len) of in are never read. dparam_bias (if not null) += column sums of out (the
  // backward of split_heads' bias).
  virtual void merge_heads(DType dt, const void* in, int batch, int len, int padded_len, int heads, int head_dim,
                           int parts, void* out, float* dparam_bias) = 0;
  // probs = softmax(scale * scores) over k_len for scores [batch][heads][q_len][ld] (ld >= k_len: the row stride;
  // the attention layer pads it to a multiple of 8 so that the score GEMMs get aligned tensor-core kernels). Keys
  // j >= k_lengths[b] (if k_lengths not null) and, when causal, keys j > i (query i) get probability 0; the padding
  // columns [k_len, ld) of probs are set to 0 and those of scores (which may hold anything, NaN included) never
  // affect the result. probs may alias scores.
  // key_starts (a device array [batch][q_len], or null): keys j < key_starts[b*q_len + i] of query i also get
  // probability 0. With causal this confines each query to keys [start, i]: its own document of a language model's
  // packed block (DecoderOnlyModel's document masks). A row whose start is past its last key is all zeros.
  virtual void attention_softmax_forward(DType dt, const void* scores, const int32_t* k_lengths, int batch,
                                         int heads, int q_len, int k_len, int ld, float scale, bool causal,
                                         void* probs, const int32_t* key_starts = nullptr) = 0;
  // dscores = scale * probs * (dprobs - rowsum(dprobs * probs)) over the first k_len columns of rows of stride ld
  // (ld >= k_len); dscores' columns [k_len, ld) are set to 0 and those of probs/dprobs (anything, NaN included)
  // never affect the result. dscores may alias dprobs.
  virtual void attention_softmax_backward(DType dt, const void* probs, const void* dprobs, int rows, int k_len,
                                          int ld, float scale, void* dscores) = 0;
  // One decoding step's self-attention inputs from the projected qkv [rows, 3*heads*head_dim] (row r: the heads'
  // queries, then keys, then values) plus bias [3*heads*head_dim], in one op (split_heads and the cache append's
  // gather_rows together): slice i = r*heads + h gets its query at q + i*head_dim, its key at cache row
  // append_dst[i] and its value at cache row append_dst[rows*heads + i] (rows of head_dim in `cache`; device array,
  // entries >= 0 and distinct, as gather_rows' dst_index). The bias is added in fp32, rounded to dt once.
  virtual void split_step_qkv(DType dt, const void* qkv, const void* bias, int rows, int heads, int head_dim,
                              void* q, void* cache, const int32_t* append_dst) = 0;
  // Incremental decoding's attention in one op: one query per (row, head) over cached keys/values. Slice
  // i = r*heads + h (r < rows, h < heads) has its query [head_dim] at q + i*head_dim; its key j and value j are
  // the rows of head_dim at s_j*slice_stride + j*head_dim in k and in v, where
  // - s_j = origin[r*origin_stride + j]*heads + h when origin (device array, entries >= 0) is not null: beam
  //   search's position-origin table, key j of row r lives at position j of the slice of the row that wrote it
  //   (self-attention caches that are re-indexed, never moved: docs/decoding.md); origin_stride >= k_len;
  // - else s_j = kv_index[i] (device array; slices may share keys: cross-attention), or s_j = i when kv_index is
  //   null. kv_index and origin exclude each other; origin_stride is ignored without origin.
  // Keys key_starts[r] <= j < valid = min(k_len, k_lengths[r]) take part (from 0 when key_starts is null, up to
  // k_len when k_lengths is null): context[i*head_dim + d] = sum_j p_j v_j[d] with p = softmax_j(scale * q.k_j), in
  // fp32, rounded to dt once. A slice without valid keys gets context 0 (never NaN). head_dim <= kMaxStepHeadDim.
  // key_starts (device array [rows]) lets rows of one step begin at different cache positions: a language model's
  // prompts of different lengths, laid out so that they end at the same position (DecoderOnlyStepModel).
  static constexpr int kMaxStepHeadDim = 256;
  virtual void attention_step(DType dt, const void* q, const void* k, const void* v, int64_t slice_stride,
                              const int32_t* kv_index, const int32_t* origin, int origin_stride,
                              const int32_t* k_lengths, int rows, int heads, int head_dim, int k_len, float scale,
                              void* context, const int32_t* key_starts = nullptr) = 0;

  // ---- fused attention core (training, scoring and prefill) ----
  // Whether attention_forward/attention_backward take these lengths and head size; otherwise the caller composes
  // gemm and attention_softmax_*. A pure function of its arguments, the same on every backend and for every dtype,
  // so that CPU and GPU runs take the same path: 1 <= q_len, k_len <= kMaxFusedAttentionLen and
  // 1 <= head_dim <= kMaxFusedAttentionHeadDim. (The CUDA kernels keep a whole slice in shared memory up to 128
  // positions and go tile by tile with an online softmax above; the head size bounds their register tiles.)
  static constexpr int kMaxFusedAttentionLen = 16384;
  static constexpr int kMaxFusedAttentionHeadDim = 64;
  static bool fused_attention_fits(int q_len, int k_len, int head_dim) {
    return q_len >= 1 && q_len <= kMaxFusedAttentionLen && k_len >= 1 && k_len <= kMaxFusedAttentionLen &&
           head_dim >= 1 && head_dim <= kMaxFusedAttentionHeadDim;
  }
  // Whether the fused core also takes dropout on the probabilities at these lengths: past the GPU's whole-slice
  // kernels (kWholeSliceAttentionLen), whose tiled successors draw the masks; shorter slices drop out composed.
  static constexpr int kWholeSliceAttentionLen = 128;
  static bool fused_attention_drops(int q_len, int k_len) {
    return q_len > kWholeSliceAttentionLen || k_len > kWholeSliceAttentionLen;
  }
  // The operands stay in the projections' token-major layout (no split into heads, no merge): the query of
  // sentence b < batch, position i < q_len, head h < heads is the head_dim values at q + (b*q_len + i)*ldq +
  // h*head_dim, the key and value of position j < k_len at k and v + (b*k_len + j)*ldkv + h*head_dim (so q, k, v
  // may be column ranges of one fused qkv product, ldq = ldkv = 3*heads*head_dim). Per slice s = b*heads + h:
  // context row b*q_len + i, columns h*head_dim.. of the dense [batch*q_len, heads*head_dim] = softmax(scale q k^T) v
  // with the masks of attention_softmax_forward (keys j >= k_lengths[b] (if not null) and, when causal, keys j > i
  // get probability 0), and lse[s*q_len + i] = log sum_j exp(scale q_i.k_j) over row i's unmasked keys (fp32; -inf
  // for a row without keys, whose context row is 0). Math in fp32; on the GPU the probabilities are rounded to dt
  // before the product with v, as the composed path stores them. Requires fused_attention_fits; ldq, ldkv >=
  // heads*head_dim.
  // Packed (padding-free) rows: with q_offsets (a device array of batch + 1 row offsets) sentence b's queries, and
  // its context rows, are rows q_offsets[b] .. q_offsets[b+1] - 1 (at most q_len of them) instead of b*q_len ..;
  // with k_offsets its keys and values alike (also bounding its keys with k_lengths). Rows past a sentence's count
  // are neither read nor written (fused_attention_layout.h); their lse entries are left as they were.
  // drop (p > 0 only where fused_attention_drops): the probabilities are dropped out before the product with v,
  // context_i = sum_j P_ij M_ij v_j with M_ij = dropout_multiplier(drop.key, (s*q_len + i)*k_len + j, drop.p)
  // (kernels/dropout_rng.h; i, j a sentence's own positions, packed or not); lse is that of the undropped P.
  virtual void attention_forward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                                 const int32_t* k_lengths, int batch, int heads, int q_len, int k_len, int head_dim,
                                 float scale, bool causal, void* context, float* lse,
                                 const int32_t* q_offsets = nullptr, const int32_t* k_offsets = nullptr,
                                 const Dropout& drop = Dropout{}) = 0;
  // The gradients of that map for d_context (the context's layout), written in the inputs' layouts: d_q with ldq,
  // d_k and d_v with ldkv (overwritten over each slice's columns; rows of masked keys 0; so the d_q/d_k/d_v parts
  // of one d_qkv buffer are all written), from the probabilities recomputed as exp(scale q_i.k_j - lse_i). context
  // is forward's output: the GPU's tiled kernels take the softmax gradient's row sums D_i = sum_j P_ij dP_ij as
  // d_context_i . context_i from it instead of a pass over the keys (with dropout: dP = (dO v^T) M, and still
  // D_i = d_context_i . context_i). d_q, d_k, d_v must not overlap the inputs. Deterministic (no atomics). drop: as
  // forward's.
  virtual void attention_backward(DType dt, const void* q, int ldq, const void* k, const void* v, int ldkv,
                                  const int32_t* k_lengths, int batch, int heads, int q_len, int k_len, int head_dim,
                                  float scale, bool causal, const float* lse, const void* context,
                                  const void* d_context, void* d_q, void* d_k, void* d_v,
                                  const int32_t* q_offsets = nullptr, const int32_t* k_offsets = nullptr,
                                  const Dropout& drop = Dropout{}) = 0;

  // ---- loss ----
  // Label-smoothed cross-entropy of logits [n, vocab] against targets [n]; rows whose target == ignore_index
  // (padding) give loss 0 and gradient 0. Per row: loss = -(1-ls) log p[y] - ls/vocab * sum_v log p[v],
  // nll = -log p[y]; loss and nll are per row ([n]), either may be nullptr. If dlogits is not null it receives
  // grad_scale * d loss / d logits (may alias logits).
  // bias [vocab] (type dt) or nullptr: the logits are then logits + bias (broadcast over rows, added in fp32), so
  // the output layer's bias needs no pass of its own when only the loss and its gradient are wanted; dlogits is
  // the gradient with respect to (logits + bias), which is also the one of the logits, and its column sums are the
  // bias gradient. Probabilities are never materialised as a separate buffer.
  // ld (0: vocab) is the row stride of logits and dlogits: rows padded to 16 bytes keep the output layer's GEMMs
  // on aligned tensor-core kernels whatever the vocabulary. dlogits' columns from vocab to ld may be overwritten.
  virtual void cross_entropy(DType dt, const void* logits, const void* bias, const int32_t* targets, int n, int vocab,
                             float label_smoothing, int ignore_index, float grad_scale, float* loss,
                             float* nll, void* dlogits, int ld = 0) = 0;

  // out[r, :] = logits[r, :] - log(sum_v exp(logits[r, v])) for logits [rows, cols]; fp32 output whatever dt
  // (decoding's next-token log-probabilities). Rows of logits are ld apart (0: cols), those of out cols apart; out
  // may alias logits when dt is fp32 and ld is cols.
  virtual void log_softmax(DType dt, const void* logits, int rows, int cols, float* out, int ld = 0) = 0;
  // Beam search's step without the whole distribution: per row r of logits [rows, cols], the k best tokens among
  // ids >= first_allowed_id by log p = logits - logsumexp(row) (fp32, as log_softmax), best first: values[r*k + i]
  // (fp32) and ids[r*k + i] (int32). On equal values the lower id comes first and NaN comes after every number
  // (kernels/topk_order.h: the same on every backend). A row with fewer than k such ids fills the rest with value
  // -inf and id -1. eos_log_prob[r] = log p of eos_id (0 <= eos_id < cols; eos may also be among the k if
  // eos_id >= first_allowed_id). 1 <= k <= kMaxTopK (128). Rows of logits are ld apart (0: cols).
  virtual void topk_log_softmax(DType dt, const void* logits, int rows, int cols, int k, int first_allowed_id,
                                int eos_id, float* values, int32_t* ids, float* eos_log_prob, int ld = 0) = 0;
  // Top-k sampling's draw where the step ran (kernels/topk_draw.h, the host search's own draw): row r < rows of
  // topk_log_softmax's values / ids [rows, k] and eos_log_probs draws tokens[r] and its log-probability
  // token_log_probs[r] with one uniform number of its SplitMix64 stream, streams[r] (advanced by the draw), at
  // temperature `temperature`, while remaining[r] > 0 (then decremented unless the token is eos_id). Where
  // remaining[r] <= 0, or no candidate is drawable, the token is eos_id with log-probability eos_log_probs[r] and
  // the stream is not advanced. 1 <= k <= kMaxTopK.
  virtual void draw_topk(const float* values, const int32_t* ids, const float* eos_log_probs, int rows, int k,
                         int32_t eos_id, double temperature, uint64_t* streams, int32_t* remaining, int32_t* tokens,
                         float* token_log_probs) = 0;

  // ---- optimizer over the flat fp32 buffers ----
  // norm[0] = sqrt(sum (pre_scale * g)^2); factor[0] = pre_scale * min(1, max_norm / norm) (max_norm <= 0: no
  // clipping), or NaN when the norm is not finite. Both are device scalars: nothing returns to the host.
  virtual void grad_norm(const float* grads, std::size_t n, float pre_scale, float max_norm, float* norm,
                         float* factor) = 0;
  // AdamW over n parameters with gradients multiplied by factor[0] (device scalar); when factor[0] is not
  // finite the update is skipped (a NaN/Inf step). Writes the working copy (type working_dt) in the same pass
  // when working is not null.
  virtual void adam_update(float* params, const float* grads, float* m, float* v, std::size_t n,
                           const AdamArgs& args, const float* factor, DType working_dt, void* working) = 0;
};

// The CPU backend always exists; the CUDA backend where lseq was built with it (otherwise this throws an
// lseq::Error that says so and suggests --cpu).
std::unique_ptr<Backend> make_cpu_backend(int threads = 0);  // 0: all cores
std::unique_ptr<Backend> make_cuda_backend(int device_index);
bool cuda_backend_available();  // built with CUDA and a GPU is visible

}  // namespace lseq::kernels
