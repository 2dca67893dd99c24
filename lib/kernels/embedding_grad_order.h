#pragma once
// The summation order of the embedding table gradient (Backend::embedding_backward), shared by the CPU and CUDA
// backends so that both give the same bits:
//   1. the rows are stably sorted by token (rows of one token keep their original order);
//   2. the sorted rows are cut into windows of kEmbeddingGradWindow rows (window w = sorted rows [w*W, (w+1)*W));
//   3. within a window, each token's rows are summed from zero in order: partial = 0 + scale*v_1 + scale*v_2 ...
//      (v = dout * dropout mask, products rounded, no fused multiply-add);
//   4. the token's partials are added to its gradient row in window order: dtable = (dtable + p_1) + p_2 ...
// A frequent token (padding) thus costs ceil(count / W) sequential additions after a parallel pass over windows,
// instead of count sequential ones.
namespace lseq::kernels {

constexpr int kEmbeddingGradWindow = 32;

}  // namespace lseq::kernels
