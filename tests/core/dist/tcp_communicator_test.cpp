// The CPU stand-in for NCCL: ranks as threads over loopback TCP, each with its own CPU backend. Every collective
// gives the sums in rank order on every rank (the same bits everywhere), on uneven and empty ranges, in fp32 and
// 16-bit types; ranks that issue different collectives fail instead of mixing data.
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>
#include <vector>

#include "core/dist/process_group.h"
#include "dist_test_util.h"
#include "kernels/backend.h"
#include "kernels/cpu/float_convert.h"

namespace lseq::dist::test {
namespace {

using kernels::DType;

// Values that do not add up exactly in fp32 in every order (so that rank order is visible).
float value(int rank, std::size_t i) { return 1.0f / static_cast<float>(3 + i % 7) + 1e-3f * rank * (i + 1); }

float rank_order_sum(int world, std::size_t i) {
  float acc = value(0, i);
  for (int r = 1; r < world; ++r) acc += value(r, i);
  return acc;
}

struct Rank {
  ProcessGroup group;
  std::unique_ptr<kernels::Backend> backend = kernels::make_cpu_backend(1);
  kernels::Communicator* comm;
  Rank(int rank, int world, int port, double timeout = 20)
      : group(rank_env(rank, world, port), "cpu", test_options(timeout)), comm(group.connect(*backend)) {}
};

TEST(TcpCommunicator, AllReduceSumsInRankOrderOnEveryRank) {
  for (int world : {2, 3}) {
    const int port = free_port();
    const std::size_t n = 1000;
    std::vector<std::vector<float>> results(static_cast<std::size_t>(world));
    const auto errors = run_ranks(world, [&](int r) {
      Rank rank(r, world, port);
      EXPECT_EQ(rank.comm->rank(), r);
      EXPECT_EQ(rank.comm->size(), world);
      std::vector<float> x(n);
      for (std::size_t i = 0; i < n; ++i) x[i] = value(r, i);
      rank.comm->all_reduce(DType::f32, x.data(), n);
      rank.comm->wait();
      results[static_cast<std::size_t>(r)] = x;
    });
    for (const auto& e : errors) ASSERT_EQ(e, "");
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(results[0][i], rank_order_sum(world, i)) << i;
    for (int r = 1; r < world; ++r) EXPECT_EQ(results[static_cast<std::size_t>(r)], results[0]);
  }
}

TEST(TcpCommunicator, Bf16IsSummedInFp32AndRoundedOnce) {
  const int port = free_port(), world = 3;
  const std::size_t n = 64;
  std::vector<std::vector<uint16_t>> results(world);
  const auto errors = run_ranks(world, [&](int r) {
    Rank rank(r, world, port);
    std::vector<uint16_t> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = kernels::float_to_bf16(value(r, i));
    rank.comm->all_reduce(DType::bf16, x.data(), n);
    rank.comm->wait();
    results[static_cast<std::size_t>(r)] = x;
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  for (std::size_t i = 0; i < n; ++i) {
    float acc = 0;
    for (int r = 0; r < world; ++r) acc += kernels::bf16_to_float(kernels::float_to_bf16(value(r, i)));
    ASSERT_EQ(results[0][i], kernels::float_to_bf16(acc)) << i;
  }
  EXPECT_EQ(results[1], results[0]);
  EXPECT_EQ(results[2], results[0]);
}

TEST(TcpCommunicator, ReduceScatterAndAllGatherOverUnevenAndEmptyRanges) {
  const int port = free_port(), world = 3;
  const std::size_t n = 50;
  const std::vector<std::size_t> offsets = {3, 20, 20, 47};  // rank 1 owns nothing; [0,3) and [47,50) nobody
  std::vector<std::vector<float>> scattered(world), gathered(world);
  const auto errors = run_ranks(world, [&](int r) {
    Rank rank(r, world, port);
    std::vector<float> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = value(r, i);
    rank.comm->reduce_scatter(DType::f32, x.data(), offsets);
    rank.comm->wait();
    scattered[static_cast<std::size_t>(r)] = x;
    rank.comm->all_gather(DType::f32, x.data(), offsets);
    rank.comm->wait();
    gathered[static_cast<std::size_t>(r)] = x;
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  for (int r = 0; r < world; ++r) {
    const auto& s = scattered[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < n; ++i) {
      const bool owned = i >= offsets[r] && i < offsets[r + 1];
      ASSERT_EQ(s[i], owned ? rank_order_sum(world, i) : value(r, i)) << "rank " << r << " element " << i;
    }
    const auto& g = gathered[static_cast<std::size_t>(r)];
    for (std::size_t i = 0; i < n; ++i) {
      const bool shared = i >= offsets[0] && i < offsets[world];
      ASSERT_EQ(g[i], shared ? rank_order_sum(world, i) : value(r, i)) << "rank " << r << " element " << i;
    }
  }
}

TEST(TcpCommunicator, BroadcastAndHostSums) {
  const int port = free_port(), world = 3;
  std::vector<std::vector<float>> got(world);
  std::vector<std::vector<double>> sums(world);
  const auto errors = run_ranks(world, [&](int r) {
    Rank rank(r, world, port);
    std::vector<float> x(5, static_cast<float>(r));
    rank.comm->broadcast(DType::f32, x.data(), x.size(), 2);
    rank.comm->wait();
    got[static_cast<std::size_t>(r)] = x;
    std::vector<double> v = {1.0 * r, 0.5, r == 1 ? 1e300 : 0.0};
    rank.comm->sum_host(v);
    sums[static_cast<std::size_t>(r)] = v;
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(got[static_cast<std::size_t>(r)], std::vector<float>(5, 2.0f));
    EXPECT_EQ(sums[static_cast<std::size_t>(r)], (std::vector<double>{3.0, 1.5, 1e300}));
  }
}

TEST(TcpCommunicator, LargeBuffersGoInSlices) {
  // More than one 16 MiB slice of the star: 5M floats.
  const int port = free_port(), world = 2;
  const std::size_t n = std::size_t(5) << 20;
  std::vector<float> result;
  const auto errors = run_ranks(world, [&](int r) {
    Rank rank(r, world, port);
    std::vector<float> x(n, r == 0 ? 1.0f : 2.0f);
    x[n - 1] = 10.0f;
    rank.comm->all_reduce(DType::f32, x.data(), n);
    rank.comm->wait();
    if (r == 1) result = x;
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  EXPECT_EQ(result[0], 3.0f);
  EXPECT_EQ(result[n / 2], 3.0f);
  EXPECT_EQ(result[n - 1], 20.0f);
}

TEST(TcpCommunicator, DifferentCollectivesOnTwoRanksFailInsteadOfMixingData) {
  const int port = free_port();
  const auto errors = run_ranks(2, [&](int r) {
    Rank rank(r, 2, port, 5);
    std::vector<float> x(r == 0 ? 4 : 5, 1.0f);
    rank.comm->all_reduce(DType::f32, x.data(), x.size());
    rank.comm->wait();
  });
  EXPECT_NE(errors[0].find("different collectives"), std::string::npos) << errors[0];
}

TEST(TcpCommunicator, ARankThatLeavesFailsTheOthersCollectiveNamingIt) {
  const int port = free_port();
  const auto errors = run_ranks(2, [&](int r) {
    Rank rank(r, 2, port, 20);
    if (r == 1) return;  // leaves: its connections close
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::vector<float> x(8, 1.0f);
    rank.comm->all_reduce(DType::f32, x.data(), x.size());
    rank.comm->wait();
  });
  EXPECT_EQ(errors[1], "");
  EXPECT_NE(errors[0].find("rank 1 closed its connection"), std::string::npos) << errors[0];
}

TEST(TcpCommunicator, ARankThatHangsTimesOut) {
  const int port = free_port();
  std::mutex m;
  const auto errors = run_ranks(2, [&](int r) {
    Rank rank(r, 2, port, 1.0);
    std::vector<float> x(8, 1.0f);
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // never joins the collective in time
      return;
    }
    const double start = steady_seconds();
    rank.comm->all_reduce(DType::f32, x.data(), x.size());
    try {
      rank.comm->wait();
    } catch (...) {
      EXPECT_LT(steady_seconds() - start, 2.5);
      throw;
    }
  });
  EXPECT_NE(errors[0].find("rank 1"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("--dist-timeout"), std::string::npos) << errors[0];
}

TEST(TcpCommunicator, AbortEndsACollectiveInProgressWithItsReason) {
  const int port = free_port();
  const auto errors = run_ranks(2, [&](int r) {
    Rank rank(r, 2, port, 30);
    if (r == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return;
    }
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      rank.comm->abort("rank 7 stopped unexpectedly");
    });
    std::vector<float> x(8, 1.0f);
    rank.comm->all_reduce(DType::f32, x.data(), x.size());
    try {
      rank.comm->wait();
    } catch (...) {
      aborter.join();
      throw;
    }
    aborter.join();
  });
  EXPECT_EQ(errors[0], "rank 7 stopped unexpectedly");
}

}  // namespace
}  // namespace lseq::dist::test
