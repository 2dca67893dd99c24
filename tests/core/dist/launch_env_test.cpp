// The launchers' environments (torchrun, Slurm, Open MPI) and Slurm's compressed node lists.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/dist/launch_env.h"
#include "util/error.h"

namespace lseq::dist::test {
namespace {

LaunchEnv from(const std::map<std::string, std::string>& vars) {
  return read_launch_env([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

std::string error_of(const std::map<std::string, std::string>& vars) {
  try {
    from(vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchEnv, NothingSetIsASingleProcess) {
  const LaunchEnv e = from({{"HOME", "/root"}});
  EXPECT_FALSE(e.launched());
  EXPECT_EQ(e.world, 1);
  EXPECT_EQ(e.rank, 0);
}

TEST(LaunchEnv, Torchrun) {
  const LaunchEnv e = from({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                            {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world, 2);
  EXPECT_EQ(e.master_addr, "node7");
  EXPECT_EQ(e.master_port, 29500);
}

TEST(LaunchEnv, TorchrunWinsOverSlurm) {
  const LaunchEnv e = from({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1234"},
                            {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 1);
}

TEST(LaunchEnv, LstrainDevicesNamesItself) {
  const LaunchEnv e = from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1"},
                            {"LSEQ_LAUNCHER", "lstrain --devices"}});
  EXPECT_EQ(e.launcher, "lstrain --devices");
}

TEST(LaunchEnv, SlurmTakesTheFirstNodeAndAPortFromTheJob) {
  const LaunchEnv e = from({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"},
                            {"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_JOB_NODELIST", "gpu[07-08]"},
                            {"SLURM_JOB_ID", "123456"}});
  EXPECT_EQ(e.launcher, "slurm");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_world, 4);
  EXPECT_EQ(e.master_addr, "gpu07");
  EXPECT_EQ(e.master_port, 20000 + 123456 % 20000);
  // MASTER_ADDR and MASTER_PORT win; the step's task count wins over the job's.
  const LaunchEnv f = from({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"SLURM_STEP_NUM_TASKS", "2"},
                            {"SLURM_NODELIST", "x1"}, {"MASTER_ADDR", "head"}, {"MASTER_PORT", "4000"}});
  EXPECT_EQ(f.world, 2);
  EXPECT_EQ(f.master_addr, "head");
  EXPECT_EQ(f.master_port, 4000);
}

TEST(LaunchEnv, OpenMpiNeedsTheMasterFromTheCommandLine) {
  const LaunchEnv e = from({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                            {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(e.launcher, "openmpi");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.local_world, 2);
  const std::string missing = error_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  EXPECT_NE(missing.find("MASTER_ADDR"), std::string::npos) << missing;
  EXPECT_NE(missing.find("mpirun -x"), std::string::npos) << missing;
}

TEST(LaunchEnv, MalformedValuesNameTheVariable) {
  EXPECT_NE(error_of({{"RANK", "one"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}})
                .find("RANK='one'"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "1"}})
                .find("RANK=2 is not below WORLD_SIZE=2"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "70000"}})
                .find("MASTER_PORT"),
            std::string::npos);
  EXPECT_NE(error_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}}).find("MASTER_ADDR and MASTER_PORT"), std::string::npos);
}

TEST(LaunchEnv, SlurmNodeLists) {
  EXPECT_EQ(first_slurm_host("node1"), "node1");
  EXPECT_EQ(first_slurm_host("node1,node2"), "node1");
  EXPECT_EQ(first_slurm_host("gpu[01-04,07],cpu1"), "gpu01");
  EXPECT_EQ(first_slurm_host("gpu[3,5-6]"), "gpu3");
  EXPECT_EQ(first_slurm_host("node[001-003]-ib,x"), "node001-ib");
  EXPECT_EQ(first_slurm_host("rack[1-2]-n[10-11]"), "rack1-n10");
  EXPECT_THROW(first_slurm_host("gpu[01-04"), Error);
  EXPECT_THROW(first_slurm_host(""), Error);
}

}  // namespace
}  // namespace lseq::dist::test
