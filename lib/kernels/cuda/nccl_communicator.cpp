// The communicator on NVIDIA GPUs: NCCL in non-blocking mode on a stream of its own beside the CUDA backend's.
// Each collective first waits (on the device) for the backend's stream, so that it reads what the ops issued before
// it wrote, and runs while the backend goes on (the overlap of gradient buckets with backward); wait() makes the
// backend's stream wait for it in turn, recording two events around that wait to measure how long the backend
// stood idle for communication.
// Nothing may block for ever: every NCCL call in non-blocking mode returns at once (ncclInProgress while it sets
// up), and a watchdog thread checks the communicator's asynchronous error state and the age of the oldest
// unfinished collective every 100 ms; on an error or a collective older than the time-out it aborts the communicator
// (ncclCommAbort stops NCCL's kernels, so the streams drain) and every later call throws the reason. The rank-failure
// monitor of the process group calls abort() the same way when another rank dies.
// Windows (allocate_window): ncclMemAlloc memory registered as a symmetric window, which NCCL's symmetric kernels
// (AllReduce_RSxLD_AGxST and kin, no NVLink multicast) sum in place over NVLink; the trainer's gradient buffer is
// one (DataParallel).
// Two communicators (NcclOptions::overlap_ctas, alone_ctas): the gradient buckets that run beside backward take few
// blocks, since every SM they hold is one backward's kernels lose (a bucket's sum alone in NCCL's default 7 blocks
// slowed the backward beside it by about its own time); the collectives the step waits for (the buckets left at
// backward's end, the optimizer's) go to a split of it with many blocks. Both share the stream, so every rank still
// runs its collectives in the order it issued them.
// Ranges: equal contiguous ranges use NCCL's in-place ncclReduceScatter / ncclAllGather; uneven ones (a bucket that
// crosses a shard boundary) a group of ncclReduce / ncclBroadcast, one per non-empty range, which NCCL runs as one
// operation.
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/communicator.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "util/error.h"

namespace lseq::kernels {

namespace {

// Between two polls of a call in progress (NCCL's non-blocking enqueue, the comm stream): yield for the first
// milliseconds, then sleep. A short sleep lasts the kernel's timer slack (about 60 us, not the 10 or 20 asked), and
// the step's optimizer is issued behind these polls with the GPU idle: on two H200s yielding cut the host time to
// issue the sharded update from 0.40-0.54 to 0.33-0.46 ms (the rest is NCCL's own call time).
void pause_between_polls(double waited_seconds) {
  if (waited_seconds < 2e-3) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(waited_seconds < 0.1 ? 20 : 1000));
  }
}

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

ncclDataType_t nccl_type(DType dt) {
  switch (dt) {
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
  }
  return ncclFloat32;
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(CudaBackend& backend, const std::string& id, int rank, int ranks, const NcclOptions& options);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return name_; }
  void all_reduce(DType dt, void* data, std::size_t count) override;
  void reduce_scatter(DType dt, void* data, const std::vector<std::size_t>& offsets) override;
  void all_reduce_alone(DType dt, void* data, std::size_t count) override;
  void reduce_scatter_alone(DType dt, void* data, const std::vector<std::size_t>& offsets) override;
  void all_gather_alone(DType dt, void* data, const std::vector<std::size_t>& offsets) override;
  void all_gather(DType dt, void* data, const std::vector<std::size_t>& offsets) override;
  void broadcast(DType dt, void* data, std::size_t count, int root) override;
  void wait() override;
  void sum_host(std::vector<double>& values) override;
  void* allocate_window(std::size_t bytes) override;
  void release_window(void* window) override;
  double waited_seconds() override;
  void abort(const std::string& reason) override;

 private:
  using Lock = std::unique_lock<std::mutex>;
  // Throws the abort reason, or the failure of `result` naming `what`, after aborting.
  void check(Lock& lock, ncclResult_t result, const char* what);
  // Non-blocking mode: polls the communicator until the last call has been taken (not ncclInProgress), releasing
  // the lock between polls so that abort() can get in.
  void settle(Lock& lock, const char* what, double timeout_seconds);
  void settle(Lock& lock, const char* what) { settle(lock, what, options_.timeout_seconds); }
  Lock begin();           // checks for an abort; the comm stream waits for the backend's stream
  void issued(Lock& lock);  // an event after the collective, watched for its age
  void abort_locked(const std::string& reason);
  void watch();
  void harvest_waits(bool block);
  void check_offsets(const std::vector<std::size_t>& offsets) const;
  void all_reduce_on(ncclComm_t comm, DType dt, void* data, std::size_t count);
  void reduce_scatter_on(ncclComm_t comm, DType dt, void* data, const std::vector<std::size_t>& offsets);
  void all_gather_on(ncclComm_t comm, DType dt, void* data, const std::vector<std::size_t>& offsets);
  // The communicator for collectives nothing runs beside: alone_ where there is one.
  ncclComm_t alone_or_main() const { return alone_ != nullptr ? alone_ : comm_; }
  // Blocks the host until the comm stream is done, bounded by the time-out.
  void sync_stream(Lock& lock, const char* what);

  CudaBackend& backend_;
  int rank_, size_, device_;
  NcclOptions options_;
  std::string name_;
  ncclComm_t comm_ = nullptr;
  ncclComm_t alone_ = nullptr;  // split from comm_ with more CTAs (NcclOptions::alone_ctas), or null
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
  double* device_values_ = nullptr;  // sum_host's buffer
  double* host_values_ = nullptr;    // and its pinned twin: a copy to pageable memory would block under our lock
  std::size_t device_values_capacity_ = 0;
  struct Window {
    void* memory;
    ncclWindow_t main, alone;  // its registration with comm_ and with alone_
  };
  std::vector<Window> windows_;  // allocate_window's memory

  std::mutex mutex_;  // every use of comm_, the pending list and the abort reason
  std::string aborted_;
  std::deque<std::pair<cudaEvent_t, double>> pending_;  // collectives not yet seen finished, oldest first
  std::vector<cudaEvent_t> spare_events_;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> wait_marks_, spare_marks_;  // around each wait()
  double waited_ = 0;
  bool stop_ = false;
  std::condition_variable stop_changed_;
  std::thread watchdog_;
};

NcclCommunicator::NcclCommunicator(CudaBackend& backend, const std::string& id, int rank, int ranks,
                                   const NcclOptions& options)
    : backend_(backend), rank_(rank), size_(ranks), device_(backend.device()), options_(options) {
  if (id.size() != sizeof(ncclUniqueId)) fail("internal error: an NCCL id of {} bytes", id.size());
  int version = 0;
  ncclGetVersion(&version);
  name_ = fmt::format("nccl {}.{}.{}", version / 10000, version / 100 % 100, version % 100);
  int major = 0;
  LSEQ_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_));
  if (options_.measured_defaults && major >= 9) {
    options_.overlap_ctas = kOverlapCtasOneMachine;
    options_.alone_ctas = kAloneCtasOneMachine;
  }
  if (options_.overlap_ctas > 0 || options_.alone_ctas > 0) {
    auto blocks = [](int n) { return n > 0 ? fmt::format("{} blocks", n) : std::string("NCCL's choice of blocks"); };
    name_ += fmt::format(" ({} beside backward, {} when alone)", blocks(options_.overlap_ctas),
                         options_.alone_ctas > 0 ? std::to_string(options_.alone_ctas) : "the same");
  }
  LSEQ_CUDA_CHECK(cudaSetDevice(device_));
  LSEQ_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  LSEQ_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
  LSEQ_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  ncclUniqueId unique;
  std::memcpy(&unique, id.data(), sizeof unique);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  if (options_.overlap_ctas > 0) config.maxCTAs = options_.overlap_ctas;
  Lock lock(mutex_);
  const ncclResult_t made = ncclCommInitRankConfig(&comm_, ranks, unique, rank, &config);
  if (made != ncclSuccess && made != ncclInProgress) {
    fail("rank {}: NCCL could not create its communicator on GPU {}: {} ({})", rank, device_,
         ncclGetErrorString(made), comm_ ? ncclGetLastError(comm_) : "");
  }
  settle(lock, "creating the NCCL communicator (every rank must reach this point)");
  if (options_.alone_ctas > 0) {
    ncclConfig_t alone_config = NCCL_CONFIG_INITIALIZER;
    alone_config.blocking = 0;
    alone_config.minCTAs = alone_config.maxCTAs = options_.alone_ctas;
    check(lock, ncclCommSplit(comm_, 0, rank, &alone_, &alone_config), "ncclCommSplit");
    settle(lock, "creating the second NCCL communicator (every rank must reach this point)");
  }
  lock.unlock();
  watchdog_ = std::thread([this] { watch(); });
}

NcclCommunicator::~NcclCommunicator() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  stop_changed_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  cudaSetDevice(device_);
  // Windows their owners did not release: freed here, unless an error is unwinding the process (NCCL's kernels
  // might still read them; the process ends anyway).
  if (std::uncaught_exceptions() == 0) {
    while (!windows_.empty()) release_window(windows_.back().memory);
  }
  {
    Lock lock(mutex_);
    if (comm_ != nullptr) {
      bool clean = std::uncaught_exceptions() == 0;
      if (clean) {
        // Flush and release in step with the other ranks; an abort if that does not finish in time.
        try {
          // Bounded more tightly than a collective: a process must not linger at its end.
          if (alone_ != nullptr) check(lock, ncclCommFinalize(alone_), "ncclCommFinalize");
          check(lock, ncclCommFinalize(comm_), "ncclCommFinalize");
          settle(lock, "closing the NCCL communicator", std::min(options_.timeout_seconds, 30.0));
        } catch (const std::exception&) {
          clean = false;
        }
      }
      if (comm_ != nullptr) {  // an abort in check() released both
        for (ncclComm_t* c : {&alone_, &comm_}) {
          if (*c == nullptr) continue;
          if (clean) {
            ncclCommDestroy(*c);
          } else {
            ncclCommAbort(*c);
          }
          *c = nullptr;
        }
      }
    }
  }
  for (auto& e : pending_) cudaEventDestroy(e.first);
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
  for (auto& m : wait_marks_) cudaEventDestroy(m.first), cudaEventDestroy(m.second);
  for (auto& m : spare_marks_) cudaEventDestroy(m.first), cudaEventDestroy(m.second);
  if (device_values_) cudaFree(device_values_);
  if (host_values_) cudaFreeHost(host_values_);
  if (ready_) cudaEventDestroy(ready_);
  if (done_) cudaEventDestroy(done_);
  if (stream_) cudaStreamDestroy(stream_);
}

void NcclCommunicator::abort_locked(const std::string& reason) {
  if (!aborted_.empty()) return;
  aborted_ = reason;
  cudaSetDevice(device_);
  for (ncclComm_t* c : {&alone_, &comm_}) {
    if (*c == nullptr) continue;
    ncclCommAbort(*c);
    *c = nullptr;
  }
}

void NcclCommunicator::abort(const std::string& reason) {
  Lock lock(mutex_);
  abort_locked(reason);
}

void NcclCommunicator::check(Lock& lock, ncclResult_t result, const char* what) {
  if (!aborted_.empty()) throw Error(aborted_);
  if (result == ncclSuccess || result == ncclInProgress) return;
  const std::string reason = fmt::format("rank {}: {} failed: {} ({})", rank_, what, ncclGetErrorString(result),
                                         comm_ ? ncclGetLastError(comm_) : "");
  abort_locked(reason);
  (void)lock;
  throw Error(reason);
}

void NcclCommunicator::settle(Lock& lock, const char* what, double timeout_seconds) {
  const double start = now_seconds();
  for (;;) {
    if (!aborted_.empty()) throw Error(aborted_);
    bool in_progress = false;
    for (ncclComm_t c : {comm_, alone_}) {
      if (c == nullptr) continue;
      ncclResult_t state = ncclSuccess;
      const ncclResult_t queried = ncclCommGetAsyncError(c, &state);
      if (queried != ncclSuccess) check(lock, queried, what);
      if (state == ncclInProgress) {
        in_progress = true;
      } else {
        check(lock, state, what);
      }
    }
    if (!in_progress) return;
    if (now_seconds() - start > timeout_seconds) {
      const std::string reason = fmt::format("rank {}: {} did not finish within {:.0f} s (--dist-timeout): a rank "
                                             "hangs, stopped or cannot be reached", rank_, what, timeout_seconds);
      abort_locked(reason);
      throw Error(reason);
    }
    lock.unlock();
    pause_between_polls(now_seconds() - start);
    lock.lock();
  }
}

NcclCommunicator::Lock NcclCommunicator::begin() {
  Lock lock(mutex_);
  if (!aborted_.empty()) throw Error(aborted_);
  LSEQ_CUDA_CHECK(cudaSetDevice(device_));
  LSEQ_CUDA_CHECK(cudaEventRecord(ready_, backend_.stream()));
  LSEQ_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
  return lock;
}

void NcclCommunicator::issued(Lock& lock) {
  (void)lock;
  cudaEvent_t e;
  if (spare_events_.empty()) {
    LSEQ_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  } else {
    e = spare_events_.back();
    spare_events_.pop_back();
  }
  LSEQ_CUDA_CHECK(cudaEventRecord(e, stream_));
  pending_.emplace_back(e, now_seconds());
}

void NcclCommunicator::check_offsets(const std::vector<std::size_t>& offsets) const {
  if (static_cast<int>(offsets.size()) != size_ + 1) {
    fail("internal error: a collective's ranges need {} offsets", size_ + 1);
  }
  for (int r = 0; r < size_; ++r)
    if (offsets[r] > offsets[r + 1]) fail("internal error: a collective's ranges are not ascending");
}

void NcclCommunicator::all_reduce(DType dt, void* data, std::size_t count) { all_reduce_on(comm_, dt, data, count); }

void NcclCommunicator::all_reduce_alone(DType dt, void* data, std::size_t count) {
  all_reduce_on(alone_or_main(), dt, data, count);
}

void NcclCommunicator::reduce_scatter(DType dt, void* data, const std::vector<std::size_t>& offsets) {
  reduce_scatter_on(comm_, dt, data, offsets);
}

void NcclCommunicator::reduce_scatter_alone(DType dt, void* data, const std::vector<std::size_t>& offsets) {
  reduce_scatter_on(alone_or_main(), dt, data, offsets);
}

void NcclCommunicator::all_reduce_on(ncclComm_t comm, DType dt, void* data, std::size_t count) {
  if (count == 0) return;
  Lock lock = begin();
  check(lock, ncclAllReduce(data, data, count, nccl_type(dt), ncclSum, comm, stream_), "ncclAllReduce");
  settle(lock, "ncclAllReduce");
  issued(lock);
}

void NcclCommunicator::reduce_scatter_on(ncclComm_t comm, DType dt, void* data,
                                         const std::vector<std::size_t>& offsets) {
  check_offsets(offsets);
  const std::size_t es = dtype_size(dt);
  char* base = static_cast<char*>(data);
  const std::size_t first = offsets[1] - offsets[0];
  bool equal = first > 0;
  for (int r = 1; r < size_ && equal; ++r) equal = offsets[r + 1] - offsets[r] == first;
  Lock lock = begin();
  if (equal) {
    // In place: rank r's result lands at send + r * count.
    check(lock, ncclReduceScatter(base + offsets[0] * es, base + offsets[rank_] * es, first, nccl_type(dt), ncclSum,
                                  comm, stream_), "ncclReduceScatter");
  } else {
    check(lock, ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < size_; ++r) {
      const std::size_t n = offsets[r + 1] - offsets[r];
      if (n == 0) continue;
      char* p = base + offsets[r] * es;
      check(lock, ncclReduce(p, p, n, nccl_type(dt), ncclSum, r, comm, stream_), "ncclReduce");
    }
    check(lock, ncclGroupEnd(), "ncclGroupEnd (reduce)");
  }
  settle(lock, "the gradients' reduce-scatter");
  issued(lock);
}

void NcclCommunicator::all_gather(DType dt, void* data, const std::vector<std::size_t>& offsets) {
  all_gather_on(comm_, dt, data, offsets);
}

void NcclCommunicator::all_gather_alone(DType dt, void* data, const std::vector<std::size_t>& offsets) {
  all_gather_on(alone_or_main(), dt, data, offsets);
}

void NcclCommunicator::all_gather_on(ncclComm_t comm, DType dt, void* data, const std::vector<std::size_t>& offsets) {
  check_offsets(offsets);
  const std::size_t es = dtype_size(dt);
  char* base = static_cast<char*>(data);
  const std::size_t first = offsets[1] - offsets[0];
  bool equal = first > 0;
  for (int r = 1; r < size_ && equal; ++r) equal = offsets[r + 1] - offsets[r] == first;
  Lock lock = begin();
  if (equal) {
    check(lock, ncclAllGather(base + offsets[rank_] * es, base + offsets[0] * es, first, nccl_type(dt), comm, stream_),
          "ncclAllGather");
  } else {
    check(lock, ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < size_; ++r) {
      const std::size_t n = offsets[r + 1] - offsets[r];
      if (n == 0) continue;
      char* p = base + offsets[r] * es;
      check(lock, ncclBroadcast(p, p, n, nccl_type(dt), r, comm, stream_), "ncclBroadcast");
    }
    check(lock, ncclGroupEnd(), "ncclGroupEnd (broadcast)");
  }
  settle(lock, "the weights' all-gather");
  issued(lock);
}

void NcclCommunicator::broadcast(DType dt, void* data, std::size_t count, int root) {
  if (count == 0) return;
  Lock lock = begin();
  check(lock, ncclBroadcast(data, data, count, nccl_type(dt), root, comm_, stream_), "ncclBroadcast");
  settle(lock, "ncclBroadcast");
  issued(lock);
}

void NcclCommunicator::wait() {
  Lock lock(mutex_);
  if (!aborted_.empty()) throw Error(aborted_);
  LSEQ_CUDA_CHECK(cudaSetDevice(device_));
  std::pair<cudaEvent_t, cudaEvent_t> marks;
  if (spare_marks_.empty()) {
    LSEQ_CUDA_CHECK(cudaEventCreate(&marks.first));
    LSEQ_CUDA_CHECK(cudaEventCreate(&marks.second));
  } else {
    marks = spare_marks_.back();
    spare_marks_.pop_back();
  }
  LSEQ_CUDA_CHECK(cudaEventRecord(marks.first, backend_.stream()));
  LSEQ_CUDA_CHECK(cudaEventRecord(done_, stream_));
  LSEQ_CUDA_CHECK(cudaStreamWaitEvent(backend_.stream(), done_, 0));
  LSEQ_CUDA_CHECK(cudaEventRecord(marks.second, backend_.stream()));
  wait_marks_.push_back(marks);
  lock.unlock();
  harvest_waits(false);
}

void NcclCommunicator::harvest_waits(bool block) {
  Lock lock(mutex_);
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> still;
  for (auto& m : wait_marks_) {
    if (block) {
      // Bounded: the watchdog aborts a collective that takes too long, and the streams then drain.
      while (cudaEventQuery(m.second) == cudaErrorNotReady) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        lock.lock();
      }
    }
    if (cudaEventQuery(m.second) == cudaSuccess) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, m.first, m.second) == cudaSuccess) waited_ += ms / 1000.0;
      spare_marks_.push_back(m);
    } else {
      cudaGetLastError();  // cudaErrorNotReady is not an error to keep
      still.push_back(m);
    }
  }
  wait_marks_ = std::move(still);
}

double NcclCommunicator::waited_seconds() {
  harvest_waits(true);
  std::lock_guard<std::mutex> lock(mutex_);
  return waited_;
}

void NcclCommunicator::sync_stream(Lock& lock, const char* what) {
  const double start = now_seconds();
  for (;;) {
    if (!aborted_.empty()) throw Error(aborted_);
    const cudaError_t state = cudaStreamQuery(stream_);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) cuda::check_cuda(state, what);
    if (now_seconds() - start > options_.timeout_seconds) {
      const std::string reason = fmt::format("rank {}: {} did not finish within {:.0f} s (--dist-timeout): a rank "
                                             "hangs or stopped", rank_, what, options_.timeout_seconds);
      abort_locked(reason);
      throw Error(reason);
    }
    lock.unlock();
    pause_between_polls(now_seconds() - start);
    lock.lock();
  }
}

void NcclCommunicator::sum_host(std::vector<double>& values) {
  Lock lock(mutex_);
  if (!aborted_.empty()) throw Error(aborted_);
  LSEQ_CUDA_CHECK(cudaSetDevice(device_));
  if (values.empty()) {
    sync_stream(lock, "waiting for the collectives");
    return;
  }
  if (values.size() > device_values_capacity_) {
    if (device_values_) LSEQ_CUDA_CHECK(cudaFree(device_values_));
    if (host_values_) LSEQ_CUDA_CHECK(cudaFreeHost(host_values_));
    device_values_ = host_values_ = nullptr;
    device_values_capacity_ = std::max<std::size_t>(64, values.size());
    LSEQ_CUDA_CHECK(cudaMalloc(&device_values_, device_values_capacity_ * sizeof(double)));
    LSEQ_CUDA_CHECK(cudaMallocHost(&host_values_, device_values_capacity_ * sizeof(double)));
  }
  const std::size_t bytes = values.size() * sizeof(double);
  // Pinned memory: both copies return at once, and sync_stream waits with the time-out, releasing the lock.
  std::copy(values.begin(), values.end(), host_values_);
  LSEQ_CUDA_CHECK(cudaMemcpyAsync(device_values_, host_values_, bytes, cudaMemcpyHostToDevice, stream_));
  check(lock, ncclAllReduce(device_values_, device_values_, values.size(), ncclFloat64, ncclSum, comm_, stream_),
        "ncclAllReduce (the losses and token counts)");
  settle(lock, "the losses' all-reduce");
  LSEQ_CUDA_CHECK(cudaMemcpyAsync(host_values_, device_values_, bytes, cudaMemcpyDeviceToHost, stream_));
  sync_stream(lock, "the losses' all-reduce");
  std::copy(host_values_, host_values_ + values.size(), values.begin());
}

void* NcclCommunicator::allocate_window(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  void* memory = nullptr;
  {
    Lock lock(mutex_);
    if (!aborted_.empty()) throw Error(aborted_);
    LSEQ_CUDA_CHECK(cudaSetDevice(device_));
    if (ncclMemAlloc(&memory, bytes) != ncclSuccess) memory = nullptr;
    cudaGetLastError();  // a failed allocation leaves nothing to report: the caller takes the backend's memory
  }
  // The registration is a collective: a window on some ranks only would leave them waiting for the others.
  std::vector<double> failed = {memory == nullptr ? 1.0 : 0.0};
  sum_host(failed);
  if (failed[0] > 0) {
    if (memory != nullptr) ncclMemFree(memory);
    return nullptr;
  }
  Lock lock(mutex_);
  Window window{memory, nullptr, nullptr};
  windows_.push_back(window);  // released by the destructor if a registration fails
  check(lock, ncclCommWindowRegister(comm_, memory, bytes, &windows_.back().main, NCCL_WIN_COLL_SYMMETRIC),
        "ncclCommWindowRegister");
  settle(lock, "registering a symmetric window (every rank must reach this point)");
  if (alone_ != nullptr) {
    check(lock, ncclCommWindowRegister(alone_, memory, bytes, &windows_.back().alone, NCCL_WIN_COLL_SYMMETRIC),
          "ncclCommWindowRegister");
    settle(lock, "registering a symmetric window (every rank must reach this point)");
  }
  return memory;
}

void NcclCommunicator::release_window(void* memory) {
  Lock lock(mutex_);
  auto it = std::find_if(windows_.begin(), windows_.end(), [&](const Window& w) { return w.memory == memory; });
  if (it == windows_.end()) fail("internal error: release_window of memory that is not a window");
  cudaSetDevice(device_);
  // After an abort the registrations went with the communicators; the memory is still ours to free.
  if (alone_ != nullptr && it->alone != nullptr) ncclCommWindowDeregister(alone_, it->alone);
  if (comm_ != nullptr && it->main != nullptr) ncclCommWindowDeregister(comm_, it->main);
  ncclMemFree(memory);
  windows_.erase(it);
}

void NcclCommunicator::watch() {
  cudaSetDevice(device_);
  Lock lock(mutex_);
  while (!stop_) {
    stop_changed_.wait_for(lock, std::chrono::milliseconds(100));
    if (stop_ || !aborted_.empty() || comm_ == nullptr) continue;
    std::string failed;
    for (ncclComm_t c : {comm_, alone_}) {
      ncclResult_t state = ncclSuccess;
      if (c != nullptr) ncclCommGetAsyncError(c, &state);
      if (failed.empty() && state != ncclSuccess && state != ncclInProgress) {
        failed = fmt::format("rank {}: NCCL reported an error during a collective: {} ({}); a rank or a link failed",
                             rank_, ncclGetErrorString(state), ncclGetLastError(c));
      }
    }
    if (!failed.empty()) {
      abort_locked(failed);
      continue;
    }
    while (!pending_.empty() && cudaEventQuery(pending_.front().first) == cudaSuccess) {
      spare_events_.push_back(pending_.front().first);
      pending_.pop_front();
    }
    cudaGetLastError();
    if (!pending_.empty() && now_seconds() - pending_.front().second > options_.timeout_seconds) {
      abort_locked(fmt::format("rank {}: a collective issued {:.0f} s ago has not finished (--dist-timeout {:.0f} "
                               "s): another rank hangs or stopped", rank_, now_seconds() - pending_.front().second,
                               options_.timeout_seconds));
    }
  }
}

}  // namespace

std::string nccl_unique_id() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    fail("rank 0: NCCL could not make the job's id: {} (check the network interfaces; NCCL_SOCKET_IFNAME selects one)",
         ncclGetErrorString(r));
  }
  return std::string(reinterpret_cast<const char*>(&id), sizeof id);
}

std::unique_ptr<Communicator> make_nccl_communicator(Backend& backend, const std::string& unique_id, int rank,
                                                     int ranks, const NcclOptions& options) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (cuda == nullptr) fail("internal error: NCCL needs the CUDA backend");
  return std::make_unique<NcclCommunicator>(*cuda, unique_id, rank, ranks, options);
}

}  // namespace lseq::kernels
