#pragma once
// CPU backends that stand in for the GPU's recorded steps (CUDA graphs) in the decoders' tests.
#include <functional>
#include <memory>

#include "kernels/cpu/cpu_backend.h"

namespace lseq::test {

// Says it records, so that the decoders pad steps, encodings and admissions as on the GPU, but returns no
// recordings: every padded shape runs op by op, and its results can be checked.
class PaddingBackend : public kernels::CpuBackend {
 public:
  PaddingBackend() : kernels::CpuBackend(1) {}
  bool can_record() const override { return true; }
};

// "Records" by running the ops once and counting; its replays count and run nothing. Enough to see which shapes are
// recorded and replayed (the values after a replay are not the step's). StepRecorder replays each recording as soon
// as it is made (a CUDA capture runs nothing), so every recording counts one replay too.
class CountingRecorder : public kernels::CpuBackend {
 public:
  CountingRecorder() : kernels::CpuBackend(2) {}
  class Graph : public kernels::OpGraph {
   public:
    explicit Graph(int& replays) : replays_(replays) {}
    void replay() override { ++replays_; }

   private:
    int& replays_;
  };
  std::unique_ptr<kernels::OpGraph> record(const std::function<void()>& ops) override {
    ops();
    return std::make_unique<Graph>(replays);
  }
  bool can_record() const override { return true; }
  int replays = 0;
};

}  // namespace lseq::test
