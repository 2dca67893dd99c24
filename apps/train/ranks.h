#pragma once
// What this lstrain process is in a training job, from --devices, --cpu and the launcher's environment
// (core/dist/launch_env.h):
// - single: one device, no launcher (or a launcher's world of one);
// - launcher: --devices lists several ids and no launcher started us: this process starts one child per device
//   (core/dist/local_launch.h) and waits for them; with --cpu the ids only count CPU processes;
// - rank: started by torchrun, srun, mpirun or lstrain --devices: one rank of the job, on the GPU
//   --devices[LOCAL_RANK] (GPU LOCAL_RANK when --devices lists fewer ids, torchrun's convention), or on the CPU with
//   its share of the cores.
#include <memory>
#include <string>

#include "core/checkpoint/checkpoint.h"
#include "core/cli/backend_select.h"
#include "core/cli/options.h"
#include "core/dist/launch_env.h"
#include "core/dist/process_group.h"

namespace lseq {

struct TrainPlace {
  enum class Role { single, launcher, rank };
  Role role = Role::single;
  dist::LaunchEnv env;
  BackendPlace backend;
  bool cpu = false;  // the CPU backend (else CUDA)
  int ranks = 1;     // the launcher's children
};

TrainPlace place_this_process(const Options& options);

// The launcher's whole job: the children's run, then their exit code.
int run_local_launcher(const TrainPlace& place, const Options& options);

// A rank joins its job (the rendezvous with rank 0; the communicator comes once the backend exists).
std::unique_ptr<dist::ProcessGroup> join_job(const TrainPlace& place, const Options& options);

// A rank other than 0, once released: the vocabularies rank 0 prepared must be visible here (else lseq::Error: on
// several machines the model directory must be shared), so that this rank never trains a vocabulary of its own.
void check_prepared_by_rank0(const Options& options, const ModelDir& dir, int rank);

// Log lines carry the rank; ranks other than 0 log only warnings and errors.
void log_as_rank(int rank);

}  // namespace lseq
