// A request's wait: done when every sentence has an answer, or the deadline, or the client gone; results after
// take() are dropped.
#include <gtest/gtest.h>

#include <thread>

#include "core/serve/pending_request.h"

namespace lseq::serve {
namespace {

NBestList one(int32_t token) {
  Hypothesis h;
  h.tokens = {token};
  return {h};
}

TEST(PendingRequest, WaitsForEveryResultFromAnotherThread) {
  PendingRequest request(3, TranslateSettings{}, Clock::now());
  request.set_error(1, "too long");
  std::thread worker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    request.set_result(2, one(7));
    request.set_result(0, one(5));
  });
  const auto outcome = request.wait(Clock::now() + std::chrono::seconds(10), nullptr, std::chrono::milliseconds(5));
  worker.join();
  EXPECT_EQ(outcome, PendingRequest::Outcome::done);
  const auto entries = request.take();
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].list.front().tokens, std::vector<int32_t>{5});
  EXPECT_EQ(entries[1].error, "too long");
  EXPECT_EQ(entries[2].list.front().tokens, std::vector<int32_t>{7});
}

TEST(PendingRequest, DeadlineAndDisconnectEndTheWait) {
  PendingRequest late(2, TranslateSettings{}, Clock::now());
  late.set_result(0, one(4));
  const auto begin = Clock::now();
  EXPECT_EQ(late.wait(begin + std::chrono::milliseconds(30), nullptr, std::chrono::milliseconds(5)),
            PendingRequest::Outcome::timed_out);
  EXPECT_GE(Clock::now() - begin, std::chrono::milliseconds(30));
  const auto entries = late.take();
  EXPECT_TRUE(entries[0].done);
  EXPECT_FALSE(entries[1].done);
  late.set_result(1, one(9));  // after take(): dropped, no crash

  PendingRequest gone(1, TranslateSettings{}, Clock::now());
  int asked = 0;
  EXPECT_EQ(gone.wait(Clock::now() + std::chrono::seconds(10), [&] { return ++asked < 3; },
                      std::chrono::milliseconds(1)),
            PendingRequest::Outcome::disconnected);
  EXPECT_EQ(asked, 3);
}

TEST(PendingRequest, AnEmptyRequestIsDoneAtOnce) {
  PendingRequest request(0, TranslateSettings{}, Clock::now());
  EXPECT_EQ(request.wait(Clock::now(), nullptr, std::chrono::milliseconds(1)), PendingRequest::Outcome::done);
}

}  // namespace
}  // namespace lseq::serve
