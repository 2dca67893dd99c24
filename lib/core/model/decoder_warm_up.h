#pragma once
// A translation decoder's first pass over its shapes, before any input (the model loader runs it on a GPU): cuBLAS's
// first launch of a kernel it has not launched before in the process costs 2-9 ms of host time on an H100 (lazy
// module loading or not), and a transformer-base decoder uses about forty of them (encodings and steps at each class
// of row counts). A fresh lstranslate paid these 0.15-0.2 s inside its first batches, while the GPU waited; now it
// pays them in the model load, where a throwaway decoder over zero weights loads them beside the weights' own load
// (core/cli/model_loader.cpp; docs/decoding.md, "A fresh process").
#include "core/search/step_model.h"

namespace lseq {

// The largest shapes a decoder was planned for.
struct WarmUpLimits {
  int sentences = 1;      // sentences (prompts) a start() may hold
  int hypotheses = 1;     // live hypotheses a step may hold (sentences x beam size)
  int source_tokens = 1;  // tokens of a source (prompt), eos included
  // Language models (DecoderOnlyStepModel): a start() prefills its prompts' tokens unpadded, all prompts together,
  // in pieces of at most this many rows. 0 for a translation model, whose sources are padded (step_rows).
  int prefill_piece = 0;
  int row_class_growth = 2;  // the GEMM row classes' growth (CudaBackend::set_matmul_row_class_growth)
};

// Runs `model`'s encodings (start, and admit where the model can admit) and its steps (step_topk, k = 1) once at
// every class of rows that a batch within the limits meets (the classes whose GEMM algorithm the CUDA backend
// chooses once: kernels/cuda/matmul_plans_cuda.cpp), with counts and lengths padded as EncoderDecoderStepModel pads
// them (step_rows); encodings for sources of at most 64 tokens. A language model's prefills instead meet each class
// up to a piece of prompt tokens once. Sources are placeholder eos tokens. No step shape runs twice, so none is
// recorded. The model is left inside a search: the next start() begins afresh, as it always does. Returns the number
// of start/admit/select/step calls made.
int warm_up_decoding(StepModel& model, const WarmUpLimits& limits);

}  // namespace lseq
