#pragma once
// Activation memory of one step, carved from the planned kernels::Workspace. Two ends of one block:
//  - keep(): buffers that live until given back in the reverse order (what forward saves for backward, which
//    backward releases block by block; gradients passed between layers), taken from the bottom;
//  - temp(): temporaries of one layer call, taken from the top and given back with rewind(mark());
//  - optionally a region at the very top for the step's parameter gradients (reserve_top), taken from its end
//    down (claim_top) as backward reaches the tensors; temporaries then come from below the taken part.
// Without a workspace it only counts (planning): the largest sum of the three seen at any point is then exactly
// what the same step needs, because planning runs the same code (over the planning backend,
// kernels/planning/planning_backend.h), with addresses of a block that is never touched.
#include <cstddef>

#include "kernels/workspace.h"

namespace lseq {

class StepMemory {
 public:
  // Takes all free space of `ws`; ws == nullptr counts instead.
  explicit StepMemory(kernels::Workspace* ws);

  void* keep(std::size_t bytes);
  void* temp(std::size_t bytes);
  template <typename T>
  T* keep_n(std::size_t n) {
    return static_cast<T*>(keep(n * sizeof(T)));
  }
  template <typename T>
  T* temp_n(std::size_t n) {
    return static_cast<T*>(temp(n * sizeof(T)));
  }

  std::size_t mark() const { return top_; }
  void rewind(std::size_t mark) { top_ = mark; }

  // Forward-only passes (decoding) give back what a layer kept once its output is copied out, and backward what a
  // block kept once its gradients are through: release_kept(kept()) taken before the layer frees everything it
  // kept (and everything kept after it: the bottom is a stack).
  std::size_t kept() const { return bottom_; }
  void release_kept(std::size_t mark);

  // A region of `bytes` at the top of the block, none of it in use yet (one per step, before any temporary).
  // Returns its start.
  void* reserve_top(std::size_t bytes);
  // Takes the region's upper `bytes` (what is taken only grows); no temporary may be live, since temporaries
  // lie right below the taken part.
  void claim_top(std::size_t bytes);

  // Bytes a workspace needs for what this step took (counting mode: the plan).
  std::size_t needed() const { return peak_; }

  static constexpr std::size_t kAlignment = 256;
  static std::size_t align(std::size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

 private:
  void check(std::size_t more);

  kernels::Workspace* ws_;
  char* base_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t bottom_ = 0;   // bytes kept
  std::size_t top_ = 0;      // bytes of temporaries in use (below the claimed part of the top region)
  std::size_t region_ = 0;   // bytes of the top region (reserve_top)
  std::size_t claimed_ = 0;  // bytes of it in use, from its end
  std::size_t peak_ = 0;     // largest bottom_ + top_ + claimed_
};

// Scoped temporaries: everything taken through `memory.temp` after construction is given back at scope end.
class TempScope {
 public:
  explicit TempScope(StepMemory& memory) : memory_(memory), mark_(memory.mark()) {}
  ~TempScope() { memory_.rewind(mark_); }
  TempScope(const TempScope&) = delete;
  TempScope& operator=(const TempScope&) = delete;

 private:
  StepMemory& memory_;
  std::size_t mark_;
};

}  // namespace lseq
