#include "ranks.h"

#include <spdlog/sinks/sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

#include "core/cli/version.h"
#include "core/dist/local_launch.h"
#include "kernels/backend.h"
#include "util/error.h"

namespace lseq {

TrainPlace place_this_process(const Options& options) {
  TrainPlace place;
  place.env = dist::read_launch_env();
  place.cpu = options.get_bool("cpu") || !kernels::cuda_backend_available();
  const std::vector<int64_t> devices = options.get_ints("devices");
  if (place.env.launched()) {
    place.role = place.env.world > 1 ? TrainPlace::Role::rank : TrainPlace::Role::single;
    const int local = place.env.local_rank;
    if (!place.cpu) {
      place.backend.device = local < static_cast<int>(devices.size()) ? static_cast<int>(devices[local]) : local;
    } else if (options.get_int("cpu-threads") == 0 && place.env.local_world > 1) {
      const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
      place.backend.cpu_threads = std::max(1, cores / place.env.local_world);
    }
    return place;
  }
  if (devices.size() <= 1) return place;
  if (!options.get_bool("cpu") && !kernels::cuda_backend_available()) {
    fail("--devices lists {} GPUs but no GPU can be used here (none is visible, or lseq was built without CUDA); "
         "add --cpu to train with {} CPU processes instead", devices.size(), devices.size());
  }
  std::set<int64_t> seen;
  for (int64_t d : devices) {
    if (!seen.insert(d).second) fail("--devices names device {} twice; give each device once", d);
  }
  place.role = TrainPlace::Role::launcher;
  place.ranks = static_cast<int>(devices.size());
  return place;
}

int run_local_launcher(const TrainPlace& place, const Options& options) {
  const std::vector<int64_t> devices = options.get_ints("devices");
  dist::LocalLaunchOptions launch;
  launch.ranks = place.ranks;
  for (int r = 0; r < place.ranks; ++r) {
    launch.labels.push_back(place.cpu ? fmt::format("CPU process {}", r) : fmt::format("GPU {}", devices[r]));
  }
  spdlog::info("starting {} ranks, one process per {}; each logs as [rank N], ranks above 0 only warnings and "
               "errors", place.ranks, place.cpu ? "CPU rank (--cpu)" : "GPU (--devices)");
  return dist::run_local_ranks(launch);
}

std::unique_ptr<dist::ProcessGroup> join_job(const TrainPlace& place, const Options& options) {
  dist::ProcessGroupOptions o;
  o.connect_timeout_s = o.timeout_s = static_cast<double>(options.get_int("dist-timeout"));
  o.fingerprint = version_string();
  o.sync_ctas = options.get_ints("sync-ctas");
  spdlog::info("rank {} of {} (local rank {}, launched by {}); rank 0 at {}:{}", place.env.rank, place.env.world,
               place.env.local_rank, place.env.launcher, place.env.master_addr, place.env.master_port);
  return std::make_unique<dist::ProcessGroup>(place.env, place.cpu ? "cpu" : "cuda", o);
}

void check_prepared_by_rank0(const Options& options, const ModelDir& dir, int rank) {
  std::vector<std::string> needed = options.get_strings("vocabs");
  std::error_code ec;
  if (needed.empty()) {
    const bool separate = std::filesystem::exists(dir.file("vocab.src.spm"), ec);
    const bool bpe = !std::filesystem::exists(dir.file("vocab.spm"), ec) &&
                     std::filesystem::exists(dir.file("vocab.json"), ec);
    needed = separate ? std::vector<std::string>{dir.file("vocab.src.spm"), dir.file("vocab.tgt.spm")}
             : bpe    ? std::vector<std::string>{dir.file("vocab.json"), dir.file("merges.txt")}
                      : std::vector<std::string>{dir.file("vocab.spm")};
  }
  for (const std::string& path : needed) {
    if (!std::filesystem::exists(path, ec)) {
      fail("rank {} cannot see the vocabulary '{}' that rank 0 prepared: on several machines the model directory "
           "(with --vocabs and --cache-dir) must be on a filesystem that every machine sees", rank, path);
    }
  }
}

void log_as_rank(int rank) {
  auto logger = spdlog::default_logger();
  logger->set_pattern(fmt::format("[%Y-%m-%d %H:%M:%S] [rank {}] [%^%l%$] %v", rank));
  if (rank == 0) return;
  for (auto& sink : logger->sinks()) sink->set_level(spdlog::level::warn);
}

}  // namespace lseq
