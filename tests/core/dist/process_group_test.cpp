// Starting a job: the rendezvous hands rank 0's payload and every rank's address to all, and each way a start can
// go wrong ends in one line that names what to fix: a port in use, an unreachable master, ranks that never come, a
// rank launched with another world size or backend, two processes claiming one rank. Rank 0 releases the others
// after set-up; a rank that fails during set-up ends the others' wait with its reason.
#include <gtest/gtest.h>

#include "core/dist/process_group.h"
#include "core/dist/rendezvous.h"
#include "dist_test_util.h"
#include "util/error.h"

namespace lseq::dist::test {
namespace {

TEST(Rendezvous, HandsOutThePayloadAndTheAddresses) {
  const int port = free_port(), world = 3;
  std::vector<Rendezvous> joined(world);
  const auto errors = run_ranks(world, [&](int r) {
    RendezvousOptions o;
    o.timeout_s = 20;
    o.kind = "cuda";
    o.payload = r == 0 ? std::string("id\0with zero", 12) : "ignored";
    o.data_port = 1000 + r;
    joined[static_cast<std::size_t>(r)] = rendezvous(rank_env(r, world, port), o);
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  for (int r = 0; r < world; ++r) {
    const Rendezvous& j = joined[static_cast<std::size_t>(r)];
    EXPECT_EQ(j.payload, std::string("id\0with zero", 12));
    ASSERT_EQ(j.ranks.size(), 3u);
    for (int q = 0; q < world; ++q) EXPECT_EQ(j.ranks[static_cast<std::size_t>(q)].port, 1000 + q);
    EXPECT_EQ(j.ranks[1].host, "127.0.0.1");
  }
  EXPECT_TRUE(joined[0].control[1].valid());
  EXPECT_TRUE(joined[1].control[0].valid());
}

TEST(Rendezvous, APortInUseIsOneLineNamingIt) {
  Socket taken = listen_on(0, "test");
  const int port = bound_port(taken);
  try {
    ProcessGroup g(rank_env(0, 2, port), "cpu", test_options(2));
    FAIL() << "rank 0 started on a port in use";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(fmt::format("MASTER_PORT={}", port)), std::string::npos) << m;
    EXPECT_NE(m.find("in use"), std::string::npos) << m;
  }
}

TEST(Rendezvous, AnUnreachableMasterTimesOutNamingTheAddress) {
  const int port = free_port();  // nobody listens there
  const double start = steady_seconds();
  try {
    ProcessGroup g(rank_env(1, 2, port), "cpu", test_options(1));
    FAIL() << "rank 1 started without a master";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(fmt::format("127.0.0.1:{} (MASTER_ADDR, MASTER_PORT)", port)), std::string::npos) << m;
    EXPECT_NE(m.find("within 1 s"), std::string::npos) << m;
  }
  EXPECT_LT(steady_seconds() - start, 5.0);
}

TEST(Rendezvous, RanksThatNeverComeAreNamed) {
  const int port = free_port();
  const auto errors = run_ranks(2, [&](int r) {
    // A world of 3 where rank 2 never starts.
    ProcessGroup g(rank_env(r, 3, port), "cpu", test_options(1.5));
  });
  EXPECT_NE(errors[0].find("rank 2 of 3 did not connect"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("rank 2 of 3 did not connect"), std::string::npos) << errors[1];
}

TEST(Rendezvous, MismatchedRanksAreRefusedByRankZeroAndToldWhy) {
  struct Case {
    int world;                 // rank 0's world
    std::vector<int> ranks;    // the other processes' RANK
    int other_world;           // their WORLD_SIZE
    std::string other_kind;
    std::string expected;
  };
  for (const Case& c : {Case{2, {1}, 3, "cpu", "launched with a world of 3 ranks, rank 0 with 2"},
                        Case{2, {1}, 2, "cuda", "trains on the cuda, rank 0 on the cpu"},
                        Case{3, {1, 1}, 3, "cpu", "two processes claim rank 1"}}) {
    const int port = free_port();
    const int processes = 1 + static_cast<int>(c.ranks.size());
    const auto errors = run_ranks(processes, [&](int i) {
      if (i == 0) {
        ProcessGroup g(rank_env(0, c.world, port), "cpu", test_options(5));
      } else {
        ProcessGroup g(rank_env(c.ranks[static_cast<std::size_t>(i - 1)], c.other_world, port), c.other_kind,
                       test_options(5));
      }
    });
    for (int i = 0; i < processes; ++i) {
      EXPECT_NE(errors[static_cast<std::size_t>(i)].find(c.expected), std::string::npos)
          << "process " << i << ": " << errors[static_cast<std::size_t>(i)];
    }
  }
}

TEST(ProcessGroup, RankZeroReleasesTheOthersAfterSetUp) {
  const int port = free_port();
  std::atomic<bool> ready{false};
  std::atomic<bool> waited_for_it{false};
  const auto errors = run_ranks(3, [&](int r) {
    ProcessGroup g(rank_env(r, 3, port), "cpu", test_options());
    if (r == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ready = true;
      g.release_others();
    } else {
      g.wait_for_rank0();
      if (ready) waited_for_it = true;
    }
  });
  for (const auto& e : errors) ASSERT_EQ(e, "");
  EXPECT_TRUE(waited_for_it);
}

TEST(ProcessGroup, AFailureDuringSetUpEndsTheOthersWaitWithItsReason) {
  const int port = free_port();
  const auto errors = run_ranks(3, [&](int r) {
    ProcessGroup g(rank_env(r, 3, port), "cpu", test_options());
    if (r == 0) {
      g.report_failure("the corpus file x.de does not exist");
      throw Error("the corpus file x.de does not exist");
    }
    g.wait_for_rank0();
  });
  EXPECT_EQ(errors[1], "rank 0 failed: the corpus file x.de does not exist");
  EXPECT_EQ(errors[2], "rank 0 failed: the corpus file x.de does not exist");
}

TEST(ProcessGroup, AnExceptionThatLeavesARankTellsTheOthers) {
  const int port = free_port();
  const auto errors = run_ranks(2, [&](int r) {
    ProcessGroup g(rank_env(r, 2, port), "cpu", test_options());
    if (r == 0) throw Error("out of memory");  // the destructor runs during the exception
    g.wait_for_rank0();
  });
  EXPECT_EQ(errors[1], "rank 0 failed: it stopped on an error (see its log)");
}

TEST(NcclOptions, TheMeasuredBlockCountsApplyOnOneMachineUnlessGiven) {
  ProcessGroupOptions o;
  o.timeout_s = 42;
  LaunchEnv env;
  env.world = env.local_world = 2;
  kernels::NcclOptions nccl = nccl_options(env, o);
  EXPECT_TRUE(nccl.measured_defaults);
  EXPECT_EQ(nccl.overlap_ctas, 0) << "left to the communicator, which knows the GPU";
  EXPECT_EQ(nccl.alone_ctas, 0);
  EXPECT_EQ(nccl.timeout_seconds, 42);
  env.world = 4;  // two machines of two
  EXPECT_FALSE(nccl_options(env, o).measured_defaults);
  o.sync_ctas = {2, 32};
  nccl = nccl_options(env, o);
  EXPECT_EQ(nccl.overlap_ctas, 2);
  EXPECT_EQ(nccl.alone_ctas, 32);
  env.world = 2;
  o.sync_ctas = {0, 0};
  nccl = nccl_options(env, o);
  EXPECT_FALSE(nccl.measured_defaults) << "0 0 asks for NCCL's own choice, also on one machine";
  EXPECT_EQ(nccl.overlap_ctas, 0);
  o.sync_ctas = {2};
  try {
    nccl_options(env, o);
    FAIL() << "one number was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--sync-ctas takes two numbers"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lseq::dist::test
