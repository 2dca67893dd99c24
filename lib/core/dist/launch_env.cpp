#include "core/dist/launch_env.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

#include "util/error.h"

namespace lseq::dist {

namespace {

bool has(const GetEnv& get, const char* name) {
  const char* v = get(name);
  return v != nullptr && *v != '\0';
}

int int_var(const GetEnv& get, const char* name, int min, int max) {
  const char* v = get(name);
  if (v == nullptr || *v == '\0') fail("the launcher did not set {} (needed to place this process in the job)", name);
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0' || value < min || value > max) {
    fail("{}='{}' is not a whole number in {}..{}", name, v, min, max);
  }
  return static_cast<int>(value);
}

int int_var_or(const GetEnv& get, const char* name, int fallback, int min, int max) {
  return has(get, name) ? int_var(get, name, min, max) : fallback;
}

// Leading count of SLURM_TASKS_PER_NODE's "2(x3),1" (tasks on this job's first nodes); 1 when absent or odd.
int leading_count(const char* v) {
  if (v == nullptr) return 1;
  const long n = std::strtol(v, nullptr, 10);
  return n >= 1 && n <= 1 << 20 ? static_cast<int>(n) : 1;
}

void check_rank(const LaunchEnv& e, const char* rank_var, const char* world_var) {
  if (e.rank >= e.world) fail("{}={} is not below {}={}", rank_var, e.rank, world_var, e.world);
}

void master_from_env(const GetEnv& get, LaunchEnv& e, const char* hint) {
  if (!has(get, "MASTER_ADDR") || !has(get, "MASTER_PORT")) {
    fail("{} launch: set MASTER_ADDR and MASTER_PORT to the host and a free port of rank 0 ({})", e.launcher, hint);
  }
  e.master_addr = get("MASTER_ADDR");
  e.master_port = int_var(get, "MASTER_PORT", 1, 65535);
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry at bracket depth 0 ("a[1-2],b" -> "a[1-2]"), then each bracket group replaced by its first
  // element ("[07-09,12]" -> "07": zero padding is part of the name).
  std::string entry;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    if (depth < 0) break;
    entry += c;
  }
  std::string host;
  for (std::size_t i = 0; i < entry.size(); ++i) {
    if (entry[i] != '[') {
      host += entry[i];
      continue;
    }
    const std::size_t close = entry.find(']', i);
    if (close == std::string::npos) fail("the Slurm node list '{}' has an unclosed '['", nodelist);
    const std::string group = entry.substr(i + 1, close - i - 1);
    const std::size_t stop = group.find_first_of(",-");
    const std::string first = group.substr(0, stop);
    if (first.empty()) fail("the Slurm node list '{}' has an empty range", nodelist);
    host += first;
    i = close;
  }
  if (host.empty()) fail("the Slurm node list '{}' names no host", nodelist);
  return host;
}

LaunchEnv read_launch_env(const GetEnv& get) {
  constexpr int kMax = 1 << 20;
  LaunchEnv e;
  if (has(get, "RANK") && has(get, "WORLD_SIZE")) {
    e.launcher = has(get, "LSEQ_LAUNCHER") ? get("LSEQ_LAUNCHER") : "torchrun";
    e.world = int_var(get, "WORLD_SIZE", 1, kMax);
    e.rank = int_var(get, "RANK", 0, kMax);
    e.local_rank = int_var_or(get, "LOCAL_RANK", 0, 0, kMax);
    e.local_world = int_var_or(get, "LOCAL_WORLD_SIZE", 1, 1, kMax);
    check_rank(e, "RANK", "WORLD_SIZE");
    master_from_env(get, e, "torchrun sets them from --master-addr/--master-port or --rdzv-endpoint");
  } else if (has(get, "OMPI_COMM_WORLD_RANK")) {
    e.launcher = "openmpi";
    e.world = int_var(get, "OMPI_COMM_WORLD_SIZE", 1, kMax);
    e.rank = int_var(get, "OMPI_COMM_WORLD_RANK", 0, kMax);
    e.local_rank = int_var_or(get, "OMPI_COMM_WORLD_LOCAL_RANK", 0, 0, kMax);
    e.local_world = int_var_or(get, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1, kMax);
    check_rank(e, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
    master_from_env(get, e, "mpirun -x MASTER_ADDR=<host of rank 0> -x MASTER_PORT=29500");
  } else if (has(get, "SLURM_PROCID")) {
    e.launcher = "slurm";
    const char* world_var = has(get, "SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
    e.world = int_var(get, world_var, 1, kMax);
    e.rank = int_var(get, "SLURM_PROCID", 0, kMax);
    e.local_rank = int_var_or(get, "SLURM_LOCALID", 0, 0, kMax);
    e.local_world = has(get, "SLURM_NTASKS_PER_NODE") ? leading_count(get("SLURM_NTASKS_PER_NODE"))
                                                      : leading_count(get("SLURM_TASKS_PER_NODE"));
    check_rank(e, "SLURM_PROCID", world_var);
    if (has(get, "MASTER_ADDR")) {
      e.master_addr = get("MASTER_ADDR");
    } else {
      const char* list_var = has(get, "SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST" : "SLURM_NODELIST";
      if (!has(get, list_var)) fail("Slurm launch: neither MASTER_ADDR nor SLURM_JOB_NODELIST is set; set MASTER_ADDR");
      e.master_addr = first_slurm_host(get(list_var));
    }
    if (has(get, "MASTER_PORT")) {
      e.master_port = int_var(get, "MASTER_PORT", 1, 65535);
    } else {
      // Every task of the job derives the same port; two jobs on one node rarely collide (set MASTER_PORT if so).
      const int job = int_var(get, "SLURM_JOB_ID", 0, std::numeric_limits<int>::max());
      e.master_port = 20000 + job % 20000;
    }
  }
  return e;
}

LaunchEnv read_launch_env() {
  return read_launch_env([](const char* name) { return static_cast<const char*>(std::getenv(name)); });
}

}  // namespace lseq::dist
