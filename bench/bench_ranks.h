#pragma once
// bench_train_throughput over several devices, as lstrain trains over them: --devices 0 1 starts one process per
// device (core/dist/local_launch.h); each joins the job (core/dist/process_group.h), runs on its device and reports
// its own numbers to rank 0, which prints the job's RESULT lines.
#include <memory>
#include <string>
#include <vector>

#include "core/cli/options.h"
#include "core/cli/version.h"
#include "core/dist/launch_env.h"
#include "core/dist/local_launch.h"
#include "core/dist/process_group.h"
#include "kernels/communicator.h"

namespace lseq::bench {

struct Ranks {
  bool launcher = false;  // this process only starts the ranks (run_local_ranks) and returns their exit code
  int rank = 0, size = 1;
  int device = -1;  // the rank's GPU (-1: the first of --devices)
  std::unique_ptr<dist::ProcessGroup> group;
  kernels::Communicator* comm = nullptr;  // after connect()
  bool printer() const { return rank == 0; }
};

inline Ranks join_ranks(const Options& options) {
  Ranks r;
  const std::vector<int64_t> devices = options.get_ints("devices");
  const dist::LaunchEnv env = dist::read_launch_env();
  if (!env.launched()) {
    r.launcher = devices.size() > 1;
    return r;
  }
  r.rank = env.rank;
  r.size = env.world;
  r.device = env.local_rank < static_cast<int>(devices.size()) ? static_cast<int>(devices[env.local_rank])
                                                               : env.local_rank;
  if (env.world > 1) {
    dist::ProcessGroupOptions o;
    o.connect_timeout_s = o.timeout_s = static_cast<double>(options.get_int("dist-timeout"));
    o.fingerprint = version_string();
    o.sync_ctas = options.get_ints("sync-ctas");
    r.group = std::make_unique<dist::ProcessGroup>(env, options.get_bool("cpu") ? "cpu" : "cuda", o);
  }
  return r;
}

inline int launch_ranks(const Options& options) {
  dist::LocalLaunchOptions launch;
  const std::vector<int64_t> devices = options.get_ints("devices");
  launch.ranks = static_cast<int>(devices.size());
  for (int64_t d : devices) launch.labels.push_back(fmt::format("device {}", d));
  return dist::run_local_ranks(launch);
}

// Every rank's value, on every rank (a collective; one rank: just the value).
inline std::vector<double> all_values(kernels::Communicator* comm, double value) {
  if (comm == nullptr) return {value};
  std::vector<double> v(static_cast<std::size_t>(comm->size()), 0.0);
  v[static_cast<std::size_t>(comm->rank())] = value;
  comm->sum_host(v);
  return v;
}

}  // namespace lseq::bench
