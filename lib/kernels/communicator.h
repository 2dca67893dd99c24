#pragma once
// Collectives between the ranks of a data-parallel job (one process per device), over buffers of the backend.
// Two implementations: NCCL beside the CUDA backend (cuda/nccl_communicator.cpp) and, for the CPU backend, processes
// connected over TCP (core/dist/tcp_communicator.h), which the CPU tests run as a stand-in for NCCL.
//
// Conventions, shared by every collective:
// - Every rank issues the same collectives in the same order with the same sizes and offsets (a mismatch is an
//   error where the implementation can see it, a hang where it cannot; the time-out then ends it).
// - A collective is issued after the ops already issued on the backend and runs beside later ones: on the GPU in
//   the communicator's own stream (it waits for the backend's stream first), on the CPU in the communicator's thread.
//   A buffer handed to a collective may be neither read nor written until wait(); wait() orders the backend's later
//   ops after every collective issued so far.
// - Sums are element-wise over ranks. fp32 sums are fp32; fp16/bf16 values are summed in fp32 and rounded once by
//   the TCP stand-in (in rank order 0, 1, ..., so a sum is the same on every rank and in every run); NCCL sums in
//   its own order (the same on every rank of one job: all ranks end with identical bits).
// - Ranges: `offsets` has size() + 1 ascending entries; rank r's range is [offsets[r], offsets[r+1]) elements from
//   `data`. Empty ranges are allowed (a range that lies outside a bucket), and ranges need not be of equal size.
// - Errors (a rank that stopped, a time-out, a failed NCCL call) throw lseq::Error naming the rank where known,
//   from the call that issues a collective or from wait().
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/dtype.h"

namespace lseq::kernels {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string name() const = 0;  // "nccl 2.28.9", "tcp (cpu)"

  // data[0..count) = the sum over ranks, in place on every rank.
  virtual void all_reduce(DType dt, void* data, std::size_t count) = 0;
  // Each rank's range receives the sum over ranks of that range (in place); the rest of data is left as it was on
  // the ranks that do not own it. ZeRO-1's gradient step: each rank then updates only its range.
  virtual void reduce_scatter(DType dt, void* data, const std::vector<std::size_t>& offsets) = 0;
  // Each rank's range is copied from that rank to every other rank (in place): the updated shards to all.
  virtual void all_gather(DType dt, void* data, const std::vector<std::size_t>& offsets) = 0;
  // all_reduce, reduce_scatter and all_gather for a collective that nothing runs beside (the step waits for it, as
  // for the gradients left at backward's end): where the implementation can, it runs on more of the device than a
  // collective that overlaps computation, which takes as few SMs as give it most of the bandwidth.
  virtual void all_reduce_alone(DType dt, void* data, std::size_t count) { all_reduce(dt, data, count); }
  virtual void reduce_scatter_alone(DType dt, void* data, const std::vector<std::size_t>& offsets) {
    reduce_scatter(dt, data, offsets);
  }
  virtual void all_gather_alone(DType dt, void* data, const std::vector<std::size_t>& offsets) {
    all_gather(dt, data, offsets);
  }
  // data[0..count) of rank `root` to every rank.
  virtual void broadcast(DType dt, void* data, std::size_t count, int root) = 0;
  // Later ops of the backend see the results of every collective issued so far. On the GPU the backend's stream
  // waits (the host does not); on the CPU the call blocks until they are done.
  virtual void wait() = 0;

  // Device memory that collectives over it run faster on, for buffers every rank allocates with the same size at
  // the same point (a collective: all ranks call it, or none): NCCL allocates it with ncclMemAlloc and registers it
  // as a symmetric window, so that sums over it run NCCL's symmetric kernels, which read the other ranks' memory
  // directly over NVLink instead of staging it through NCCL's buffers (fewer SMs and less memory traffic beside
  // the backward it overlaps). Null where the implementation has none (the caller then allocates from the backend,
  // and every rank gets null alike). release_window frees it; the communicator must still exist.
  virtual void* allocate_window(std::size_t bytes) {
    (void)bytes;
    return nullptr;
  }
  virtual void release_window(void* window) { (void)window; }

  // Blocking, on host values: every rank gets the element-wise sums over ranks (in double, in rank order). Also
  // waits for the collectives issued before it. The trainer's per-update exchange of losses, token counts and the
  // stop request.
  virtual void sum_host(std::vector<double>& values) = 0;

  // Seconds the backend stood waiting for communication in wait() since the start (on the GPU measured by events on
  // the backend's stream, so reading it synchronises; on the CPU host time): the communication the step could not
  // hide behind computation.
  virtual double waited_seconds() = 0;

  // Ends communication for good: a collective in progress stops where the implementation can stop it (NCCL's
  // communicator abort, closed sockets), and every later call throws an lseq::Error with `reason`. Any thread may
  // call it (the rank-failure monitor does); the first reason stays.
  virtual void abort(const std::string& reason) = 0;
};

// NCCL (where lseq was built with CUDA; otherwise these throw an lseq::Error that says so).
constexpr std::size_t kNcclIdBytes = 128;  // sizeof(ncclUniqueId)
std::string nccl_unique_id();              // made by rank 0, handed to the others by the rendezvous
struct NcclOptions {
  double timeout_seconds = 600;  // a collective not finished after this long ends the job (a rank hangs or died)
  // NCCL's blocks (CTAs, one SM each) for collectives that overlap computation, and for those nothing runs beside
  // (the *_alone calls, on a second communicator split from the first; without one they take the first), as
  // --sync-ctas gives them; 0: NCCL's own choice (and for alone_ctas no second communicator).
  int overlap_ctas = 0;
  int alone_ctas = 0;
  // No numbers were given and all ranks share one machine: GPUs of compute capability 9.0 and newer (where NCCL
  // runs its symmetric kernels over NVLink, and where these were measured) take kOverlapCtasOneMachine and
  // kAloneCtasOneMachine instead of the two above; anything else keeps them.
  bool measured_defaults = false;
};
// Measured on two H200s (bench/results/data-parallel-h200x2-2026-11-27c.txt): 4 blocks beside backward and 16 for
// what the step waits for trained transformer-base and -big 2.5-3% faster than NCCL's own choice (7 blocks for
// both); 2 or 3 beside backward, or 32 alone, were no better. Across machines NCCL's network rings need their
// channels, and nothing was measured there.
constexpr int kOverlapCtasOneMachine = 4, kAloneCtasOneMachine = 16;
// The communicator of `rank` in a world of `ranks`, on the CUDA backend's device and stream. Creating it is itself
// a collective over all ranks (it times out like one).
std::unique_ptr<Communicator> make_nccl_communicator(Backend& backend, const std::string& unique_id, int rank,
                                                     int ranks, const NcclOptions& options);

}  // namespace lseq::kernels
