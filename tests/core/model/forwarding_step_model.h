#pragma once
// A StepModel that forwards every call to another: tests derive from it to count or note what a search asks of a
// decoder (starts, admissions, steps) and pass everything on unchanged.
#include <cstdint>
#include <vector>

#include "core/search/step_model.h"

namespace lseq::test {

class ForwardingStepModel : public StepModel {
 public:
  explicit ForwardingStepModel(StepModel& inner) : inner_(inner) {}
  int vocab_size() const override { return inner_.vocab_size(); }
  void start(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override {
    inner_.start(src, src_lengths, sentences, src_len);
  }
  void admit(const std::vector<int32_t>& src, const std::vector<int32_t>& src_lengths, int sentences,
             int src_len) override {
    inner_.admit(src, src_lengths, sentences, src_len);
  }
  void select(const std::vector<int32_t>& parents, const std::vector<int32_t>& sentence_of) override {
    inner_.select(parents, sentence_of);
  }
  void step(const std::vector<int32_t>& tokens, std::vector<float>& log_probs) override {
    inner_.step(tokens, log_probs);
  }
  void step_topk(const std::vector<int32_t>& tokens, int k, std::vector<float>& values, std::vector<int32_t>& ids,
                 std::vector<float>& eos_log_probs) override {
    inner_.step_topk(tokens, k, values, ids, eos_log_probs);
  }
  int live() const override { return inner_.live(); }
  bool can_admit() const override { return inner_.can_admit(); }
  int max_sentences() const override { return inner_.max_sentences(); }
  int max_live_sentences() const override { return inner_.max_live_sentences(); }
  int max_hypotheses() const override { return inner_.max_hypotheses(); }
  int steps_left() const override { return inner_.steps_left(); }

 protected:
  StepModel& inner_;
};

}  // namespace lseq::test
