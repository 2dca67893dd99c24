// StepMemory: kept and temporary buffers from the two ends of one block, releasing kept buffers (forward-only
// passes, backward), the top region for a step's gradients, and the counting mode that plans a workspace.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/model/step_memory.h"
#include "kernels/backend.h"
#include "kernels/workspace.h"
#include "util/error.h"

namespace lseq {
namespace {

TEST(StepMemory, ReleasedKeptBytesAreReusedAndThePlanCountsThePeak) {
  StepMemory plan(nullptr);  // counting
  plan.keep(1000);
  const std::size_t mark = plan.kept();
  plan.keep(5000);
  plan.temp(300);
  plan.release_kept(mark);
  plan.keep(2000);  // reuses what was released
  EXPECT_EQ(plan.kept(), StepMemory::align(1000) + StepMemory::align(2000));
  EXPECT_EQ(plan.needed(), StepMemory::align(1000) + StepMemory::align(5000) + StepMemory::align(300));

  // The planned bytes suffice for the same sequence on a real workspace, and the released region is reused.
  auto backend = kernels::make_cpu_backend(1);
  kernels::Workspace ws(*backend, plan.needed(), "raise the test's plan");
  StepMemory memory(&ws);
  char* first = static_cast<char*>(memory.keep(1000));
  const std::size_t real_mark = memory.kept();
  char* big = static_cast<char*>(memory.keep(5000));
  memory.temp(300);
  memory.release_kept(real_mark);
  char* again = static_cast<char*>(memory.keep(2000));
  EXPECT_EQ(big, again);
  EXPECT_EQ(again, first + StepMemory::align(1000));
  EXPECT_THROW(memory.keep(5000), Error);  // 1000 + 2000 + 5000 kept and 300 temporary exceed the plan
}

// The top region (gradients in step memory): taken from its end down, temporaries right below the taken part, the
// plan the largest kept + temporary + taken sum seen at any point.
TEST(StepMemory, TopRegionIsTakenFromItsEndWithTemporariesBelowIt) {
  StepMemory plan(nullptr);
  plan.keep(3000);
  plan.reserve_top(4096);
  plan.claim_top(1024);
  plan.temp(512);
  const std::size_t at_first = StepMemory::align(3000) + 1024 + StepMemory::align(512);
  plan.rewind(0);
  const std::size_t mark = StepMemory::align(1000);
  plan.release_kept(mark);  // backward gives back activations ...
  plan.claim_top(4096);     // ... and the gradients take their room
  EXPECT_EQ(plan.needed(), std::max(at_first, StepMemory::align(1000) + 4096));

  auto backend = kernels::make_cpu_backend(1);
  kernels::Workspace ws(*backend, 3 * 4096, "raise the test's plan");
  StepMemory memory(&ws);
  char* kept = static_cast<char*>(memory.keep(4096));
  char* region = static_cast<char*>(memory.reserve_top(4096));
  char* end = region + 4096;
  memory.claim_top(1024);
  char* t = static_cast<char*>(memory.temp(256));
  EXPECT_EQ(t, end - 1024 - 256) << "temporaries lie right below the taken part";
  EXPECT_THROW(memory.claim_top(2048), Error) << "claimed while a temporary is live";
  memory.rewind(0);
  memory.claim_top(4096);
  EXPECT_THROW(memory.claim_top(8192), Error) << "beyond the region";
  EXPECT_EQ(static_cast<char*>(memory.keep(4096)), kept + 4096);
  EXPECT_THROW(memory.keep(256), Error) << "kept bytes may not run into the taken region";
}

// Planning runs the step's code over the counting mode's buffers and offsets them as the real step does: they are
// laid out like a workspace's and never null (offsetting null pointers is undefined behaviour).
TEST(StepMemory, CountingHandsOutDistinctBuffersLaidOutLikeAWorkspace) {
  StepMemory plan(nullptr);
  char* kept = static_cast<char*>(plan.keep(1000));
  char* next = static_cast<char*>(plan.keep(10));
  char* region = static_cast<char*>(plan.reserve_top(4096));
  plan.claim_top(1024);
  char* t = static_cast<char*>(plan.temp(256));
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(next, kept + StepMemory::align(1000));
  EXPECT_EQ(t, region + 4096 - 1024 - 256) << "temporaries right below the taken part, as on a workspace";
  EXPECT_GT(t, next) << "the two ends do not meet";
  EXPECT_EQ(plan.needed(), StepMemory::align(1000) + StepMemory::align(10) + 1024 + 256);
}

}  // namespace
}  // namespace lseq
