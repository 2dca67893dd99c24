#pragma once
// Ranks as threads of one test process: each runs the same function with its rank over a process group on the CPU
// (loopback TCP, the stand-in for NCCL), and the failures of every rank come back to the test.
#include <unistd.h>

#include <exception>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/dist/launch_env.h"
#include "core/dist/process_group.h"
#include "core/dist/socket.h"
#include "util/error.h"

namespace lseq::dist::test {

// A port for a test's master to listen on. Not one the kernel hands out (a bind to port 0): between that check and
// the master's own bind, the kernel may give the same port to another test's outgoing connection (ctest runs tests
// side by side), and the master then fails with "Address already in use" (seen once in CI, under the sanitizers).
// Ports below the kernel's ephemeral range are taken only by explicit binds: one drawn at random there, checked free.
inline int free_port() {
  int ephemeral_floor = 32768;  // Linux's default
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int first = 0, last = 0;
  if (range >> first >> last && first > 0) ephemeral_floor = first;
  if (ephemeral_floor > 10000 + 1000) {
    static std::mutex mutex;
    static std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
    std::lock_guard<std::mutex> lock(mutex);
    std::uniform_int_distribution<int> pick(10000, ephemeral_floor - 1);
    for (int attempt = 0; attempt < 100; ++attempt) {
      const int port = pick(rng);
      try {
        listen_on(port, "a test port");
        return port;
      } catch (const lseq::Error&) {
        // taken: draw another
      }
    }
  }
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
