#pragma once
// Ranks as threads of one test process: each runs the same function with its rank over a process group on the CPU
// (loopback TCP, the stand-in for NCCL), and the failures of every rank come back to the test.
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/dist/launch_env.h"
#include "core/dist/process_group.h"
#include "core/dist/socket.h"

namespace lseq::dist::test {

inline int free_port() {
  Socket s = listen_on(0, "a test port");
  return bound_port(s);
}

inline LaunchEnv rank_env(int rank, int world, int port) {
  LaunchEnv e;
  e.launcher = "test";
  e.rank = rank;
  e.world = world;
  e.local_rank = rank;
  e.local_world = world;
  e.master_addr = "127.0.0.1";
  e.master_port = port;
  return e;
}

// Short time-outs, and no process-ending backstop: tests fail ranks on purpose.
inline ProcessGroupOptions test_options(double timeout_s = 20) {
  ProcessGroupOptions o;
  o.connect_timeout_s = timeout_s;
  o.timeout_s = timeout_s;
  o.grace_s = 0;
  o.fingerprint = "test";
  return o;
}

// Runs body(rank) on `world` threads; returns each rank's error message ("" when it returned normally).
inline std::vector<std::string> run_ranks(int world, const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
        if (errors[static_cast<std::size_t>(r)].empty()) errors[static_cast<std::size_t>(r)] = "(empty message)";
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace lseq::dist::test
