// Workspace over the CPU backend: alignment, accounting, reset, and the overflow error carrying the hint.
#include "kernels/workspace.h"

#include "kernels_test_util.h"

namespace lseq::kernels::test {
namespace {

TEST_F(CpuKernels, WorkspaceHandsOutAlignedDisjointBlocks) {
  Workspace ws(backend, 10000, "raise --mini-batch-words");
  EXPECT_GE(ws.capacity(), 10000u);
  auto* a = static_cast<char*>(ws.take(1));
  auto* b = static_cast<char*>(ws.take(300));
  float* c = ws.take<float>(10);
  for (const void* p : {static_cast<const void*>(a), static_cast<const void*>(b), static_cast<const void*>(c)})
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 256, 0u);
  EXPECT_GE(b - a, 1);
  EXPECT_GE(reinterpret_cast<char*>(c) - b, 300);
  EXPECT_EQ(ws.used(), 256u + 512u + 256u);
  // The memory is usable by ops.
  backend.fill(DType::f32, c, 10, 3.0f);
  EXPECT_EQ(c[9], 3.0f);
  ws.reset();
  EXPECT_EQ(ws.used(), 0u);
  EXPECT_EQ(ws.peak(), 1024u);
  EXPECT_EQ(ws.take(1), a);  // reset starts again at the base
}

TEST_F(CpuKernels, WorkspaceOverflowNamesTheOptionToRaise) {
  Workspace ws(backend, 1000, "raise --max-length or --mini-batch-words");
  ws.take(512);
  try {
    ws.take(1000);
    FAIL() << "overflow accepted";
  } catch (const lseq::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("raise --max-length or --mini-batch-words"), std::string::npos) << message;
    EXPECT_NE(message.find("1024"), std::string::npos) << message;  // the capacity
    EXPECT_EQ(message.find('\n'), std::string::npos);
  }
  EXPECT_EQ(ws.used(), 512u);  // a failed take changes nothing
}

TEST_F(CpuKernels, EmptyWorkspaceRejectsAnyTake) {
  Workspace ws(backend, 0, "plan a workspace first");
  EXPECT_EQ(ws.capacity(), 0u);
  EXPECT_THROW(ws.take(1), lseq::Error);
}

TEST_F(CpuKernels, WorkspaceGrowsOnlyWhenAskedForMore) {
  Workspace ws(backend, 0, "lower --mini-batch-words");
  ws.ensure(1000);
  const std::size_t grown = ws.capacity();
  EXPECT_GE(grown, 1000u);
  EXPECT_EQ(grown % Workspace::kGrowthGranularity, 0u);
  ws.take(900);
  ws.reset();
  ws.ensure(grown);  // enough already: the same buffer stays
  EXPECT_EQ(ws.capacity(), grown);
  ws.ensure(grown + 1);
  EXPECT_GE(ws.capacity(), grown + 1);
  auto* p = static_cast<float*>(ws.take(grown + 1));
  backend.fill(DType::f32, p, (grown + 1) / sizeof(float), 2.0f);  // the grown buffer is real memory
  EXPECT_EQ(p[(grown + 1) / sizeof(float) - 1], 2.0f);
}

TEST_F(CpuKernels, WorkspaceRefusesToGrowWhileInUse) {
  Workspace ws(backend, 1024, "lower --mini-batch-words");
  ws.take(512);
  EXPECT_THROW(ws.ensure(1 << 20), lseq::Error);
  EXPECT_EQ(ws.capacity(), 1024u);
}

}  // namespace
}  // namespace lseq::kernels::test
