#pragma once
// lstrain --devices 0 1 on one machine: this process becomes a small launcher that starts one copy of the program
// per rank (fork + exec of /proc/self/exe with the same arguments) with torchrun's variables set (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT=a free port, and LSEQ_LAUNCHER), so
// that each child runs as one rank exactly as under torchrun. The launcher forwards SIGINT, SIGTERM and SIGHUP to
// every child (once per signal it gets: the children are in their own process group, so a terminal's Ctrl-C reaches
// them only through it), and the children stop when the launcher dies (SIGTERM from the kernel). When a rank
// fails, the others stop by themselves (the rank monitor); any still running after the grace time are killed.
#include <string>
#include <vector>

namespace lseq::dist {

// The exit code of a rank that stops because another rank failed first: the launcher then names the other one.
constexpr int kExitOtherRankFailed = 3;

struct LocalLaunchOptions {
  int ranks = 2;
  std::vector<std::string> labels;  // per rank, for messages ("GPU 1", "CPU rank 1")
  double grace_s = 30;
};

// Runs the children to the end and returns the exit code for the launcher: 0 when all succeeded; else the code of
// the rank that failed first (after one line on stderr naming it: of the ranks that ended together, one killed by a
// signal, else one that did not exit with kExitOtherRankFailed), or, when all stopped on a forwarded signal, their
// common code.
int run_local_ranks(const LocalLaunchOptions& options);

// This program's own arguments (argv[1..]) as the kernel has them (/proc/self/cmdline).
std::vector<std::string> own_arguments();

}  // namespace lseq::dist
