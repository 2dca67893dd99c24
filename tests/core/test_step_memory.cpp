// StepMemory: kept and temporary buffers from the two ends of one block, releasing kept buffers (forward-only
// passes), and the counting mode that plans a workspace.
#include <gtest/gtest.h>

#include "core/step_memory.h"
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

}  // namespace
}  // namespace lseq
