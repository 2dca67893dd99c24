#pragma once
// A step model seen through step() alone: StepModel's own step_topk and step_scores then pick from the whole
// log-probability rows on the host, the reference for the device-side paths.
#include <cstdint>
#include <vector>

#include "core/search/step_model.h"

namespace lseq::test {

// Forwards all but step_topk and step_scores to `inner`.
class WholeRowsDecoder : public StepModel {
 public:
  explicit WholeRowsDecoder(StepModel& inner) : inner_(inner) {}
  int vocab_size() const override { return inner_.vocab_size(); }
  void start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override {
    inner_.start(src, src_lengths, sentences, src_len);
  }
  void select(const std::vector<int32_t>& parents, const std::vector<int32_t>& sentence_of) override {
    inner_.select(parents, sentence_of);
  }
  void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) override {
    inner_.step(tokens, log_probs);
  }
  int live() const override { return inner_.live(); }

 private:
  StepModel& inner_;
};

}  // namespace lseq::test
