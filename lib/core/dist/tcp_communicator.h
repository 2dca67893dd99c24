#pragma once
// The CPU stand-in for NCCL: the ranks are processes (or, in tests, threads) connected pairwise over TCP, and the
// collectives move host buffers (the CPU backend's memory) between them on a thread of the communicator, so that
// communication overlaps the next ops as it does on the GPU. Sums are computed by one rank in rank order (0, 1, ...)
// in fp32 (double for sum_host) and the result sent to the others: every rank gets the same bits, in every run,
// whatever the timing. Meant for tests and small CPU jobs: rank 0 receives (world - 1) copies of each all-reduced
// buffer (a star, not a ring).
// Every message carries the collective's sequence number and size, so ranks that issue different collectives fail
// with a message instead of mixing data; a peer that closes its connection fails the collective at once, one that
// sends nothing for timeout_s fails it then.
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/dist/rendezvous.h"
#include "core/dist/socket.h"
#include "kernels/communicator.h"

namespace lseq::dist {

// The connections between all ranks: rank r connects to every lower rank at its address from the rendezvous and
// accepts every higher one on `listener` (the port it announced). Returns one socket per rank ([rank] unused).
std::vector<Socket> connect_mesh(int rank, const std::vector<RankAddress>& ranks, const Socket& listener,
                                 double timeout_s);

class TcpCommunicator final : public kernels::Communicator {
 public:
  TcpCommunicator(int rank, int world, std::vector<Socket> peers, double timeout_s);
  ~TcpCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return world_; }
  std::string name() const override { return "tcp (cpu stand-in for nccl)"; }
  void all_reduce(kernels::DType dt, void* data, std::size_t count) override;
  void reduce_scatter(kernels::DType dt, void* data, const std::vector<std::size_t>& offsets) override;
  void all_gather(kernels::DType dt, void* data, const std::vector<std::size_t>& offsets) override;
  void broadcast(kernels::DType dt, void* data, std::size_t count, int root) override;
  void wait() override;
  void sum_host(std::vector<double>& values) override;
  double waited_seconds() override { return waited_; }
  void abort(const std::string& reason) override;

  enum class Elem { f32, f16, bf16, f64 };

 private:
  struct Move {
    int peer;
    char* data;
    std::size_t bytes;
  };
  void enqueue(std::function<void()> task);
  void run();
  void check_offsets(const std::vector<std::size_t>& offsets) const;
  // One step of a collective: the sends and receives, at most one of each per peer, all progressing together.
  void exchange(const std::vector<Move>& sends, const std::vector<Move>& receives);
  void star_sum(Elem e, char* data, std::size_t count);
  void owner_sum(Elem e, char* data, const std::vector<std::size_t>& offsets);
  [[noreturn]] void rethrow_failure(const std::string& message);

  int rank_, world_;
  std::vector<Socket> peers_;
  double timeout_s_;
  uint64_t sequence_ = 0;  // collectives' steps so far: the same on every rank
  double waited_ = 0;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> tasks_;
  bool busy_ = false, stop_ = false;
  std::string error_;    // the first failure (then every call throws it)
  std::string aborted_;  // abort's reason
  std::thread worker_;
};

}  // namespace lseq::dist
