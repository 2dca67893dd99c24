#pragma once
// The start of a data-parallel job: every rank connects to rank 0 (MASTER_ADDR:MASTER_PORT), says who it is, and
// rank 0 answers once all have come: its payload (the NCCL unique id) and every rank's address for the CPU
// communicator's connections. Everything has a time-out and every failure is one line naming the rank, the address
// or the variable to fix: a port in use, an unreachable master, ranks that never came, ranks launched with another
// world size or backend, two processes claiming one rank.
// The connections to rank 0 stay open for the rest of the job (the "control" sockets): the rank-failure monitor
// (rank_monitor.h) watches them, and rank 0 releases the others through them once it has prepared the files they read.
#include <string>
#include <vector>

#include "core/dist/launch_env.h"
#include "core/dist/socket.h"

namespace lseq::dist {

struct RendezvousOptions {
  double timeout_s = 300;   // for connecting and for all ranks to arrive
  std::string kind;         // "cuda" or "cpu": every rank must run the same backend
  std::string fingerprint;  // anything that must be equal on all ranks (the version); compared by rank 0
  std::string payload;      // rank 0: handed to every rank (the NCCL unique id)
  int data_port = 0;        // this rank's listening port for the CPU communicator (0: none)
};

struct RankAddress {
  std::string host;
  int port = 0;
};

struct Rendezvous {
  std::string payload;              // rank 0's
  std::vector<RankAddress> ranks;   // each rank's data address (CPU communicator)
  // Rank 0: one socket per other rank (index = rank, [0] unused); other ranks: [0] is the socket to rank 0.
  std::vector<Socket> control;
};

Rendezvous rendezvous(const LaunchEnv& env, const RendezvousOptions& options);

}  // namespace lseq::dist
