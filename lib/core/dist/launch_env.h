#pragma once
// Where this process stands in a data-parallel job, read from the environment its launcher sets:
// - torchrun (and lstrain --devices, which sets the same variables): RANK, WORLD_SIZE, LOCAL_RANK,
//   LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT;
// - Slurm (srun): SLURM_PROCID, SLURM_STEP_NUM_TASKS or SLURM_NTASKS, SLURM_LOCALID; the master is MASTER_ADDR if
//   set, else the first host of SLURM_JOB_NODELIST (or SLURM_NODELIST), expanded here (no scontrol); the port is
//   MASTER_PORT if set, else one derived from SLURM_JOB_ID so that every task of the job agrees on it;
// - Open MPI (mpirun): OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK,
//   OMPI_COMM_WORLD_LOCAL_SIZE; the master from MASTER_ADDR and MASTER_PORT (mpirun -x passes them).
// torchrun's variables win over Slurm's and Open MPI's (torchrun inside an allocation). A variable that is set but
// malformed is an lseq::Error naming it.
#include <functional>
#include <string>

namespace lseq::dist {

struct LaunchEnv {
  std::string launcher;  // "torchrun", "slurm", "openmpi", "lstrain --devices"; empty: not launched as a rank
  int rank = 0, world = 1, local_rank = 0, local_world = 1;
  std::string master_addr;
  int master_port = 0;
  bool launched() const { return !launcher.empty(); }
};

using GetEnv = std::function<const char*(const char*)>;  // getenv, or a test's map

LaunchEnv read_launch_env(const GetEnv& get);
LaunchEnv read_launch_env();  // from the process environment

// The first host name of a Slurm node list: "gpu[01-04,07],cpu1" -> "gpu01", "node[3-4]-ib" -> "node3-ib".
std::string first_slurm_host(const std::string& nodelist);

}  // namespace lseq::dist
