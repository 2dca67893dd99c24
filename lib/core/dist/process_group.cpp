#include "core/dist/process_group.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <thread>

#include "core/dist/rendezvous.h"
#include "core/dist/tcp_communicator.h"
#include "util/error.h"

namespace lseq::dist {

ProcessGroup::ProcessGroup(const LaunchEnv& env, const std::string& kind, ProcessGroupOptions options)
    : env_(env), kind_(kind), options_(std::move(options)) {
  if (kind_ != "cuda" && kind_ != "cpu") fail("internal error: a process group on '{}'", kind_);
  RendezvousOptions r;
  r.timeout_s = options_.connect_timeout_s;
  r.kind = kind_;
  r.fingerprint = options_.fingerprint;
  if (env_.world > 1) {
    if (kind_ == "cpu") {
      data_listener_ = listen_on(0, "the CPU communicator's port");
      r.data_port = bound_port(data_listener_);
    } else if (env_.rank == 0) {
      r.payload = kernels::nccl_unique_id();
    }
  }
  Rendezvous joined = rendezvous(env_, r);
  payload_ = std::move(joined.payload);
  addresses_ = std::move(joined.ranks);
  if (env_.world > 1) {
    monitor_ = std::make_unique<RankMonitor>(env_.rank, env_.world, std::move(joined.control),
                                             [this](const std::string& reason) { on_rank_failure(reason); });
  }
}

ProcessGroup::~ProcessGroup() {
  if (std::uncaught_exceptions() > 0 && monitor_ && !monitor_->failed()) {
    report_failure("it stopped on an error (see its log)");
  }
  // Destroyed outside the lock, so that a failure seen meanwhile never waits for the lock (NCCL's closing is bounded
  // by its own time limit).
  std::unique_ptr<kernels::Communicator> closing;
  {
    std::lock_guard<std::mutex> lock(communicator_mutex_);
    closing = std::move(communicator_);
  }
  closing.reset();
  monitor_.reset();
}

void ProcessGroup::on_rank_failure(const std::string& reason) {
  if (failed_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(communicator_mutex_);
    if (communicator_) communicator_->abort(reason);
  }
  // The backstop: the main thread normally fails at its next collective and exits with the reason; if it has not
  // within the grace time (a long computation, a call that does not return), end the process here.
  const std::string line = fmt::format("error: {}; rank {} stops\n", reason, env_.rank);
  const double grace = options_.grace_s;
  if (grace <= 0) return;
  std::thread([line, grace] {
    std::this_thread::sleep_for(std::chrono::duration<double>(grace));
    ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
    (void)ignored;
    std::_Exit(1);
  }).detach();
}

void check_sync_ctas(const std::vector<int64_t>& sync_ctas) {
  if (!sync_ctas.empty() && sync_ctas.size() != 2) {
    fail("--sync-ctas takes two numbers (NCCL's blocks beside backward, and when the step waits), not {}",
         sync_ctas.size());
  }
}

kernels::NcclOptions nccl_options(const LaunchEnv& env, const ProcessGroupOptions& options) {
  check_sync_ctas(options.sync_ctas);
  kernels::NcclOptions nccl;
  nccl.timeout_seconds = options.timeout_s;
  if (options.sync_ctas.size() == 2) {
    nccl.overlap_ctas = static_cast<int>(options.sync_ctas[0]);
    nccl.alone_ctas = static_cast<int>(options.sync_ctas[1]);
  }
  nccl.measured_defaults = options.sync_ctas.empty() && env.local_world == env.world;
  return nccl;
}

kernels::Communicator* ProcessGroup::connect(kernels::Backend& backend) {
  if (env_.world == 1) return nullptr;
  if (communicator_) fail("internal error: the process group is already connected");
  std::unique_ptr<kernels::Communicator> made;
  if (kind_ == "cpu") {
    if (backend.kind() != kernels::DeviceKind::cpu) fail("internal error: a CPU process group over a GPU backend");
    std::vector<Socket> mesh = connect_mesh(env_.rank, addresses_, data_listener_, options_.connect_timeout_s);
    data_listener_.close();
    made = std::make_unique<TcpCommunicator>(env_.rank, env_.world, std::move(mesh), options_.timeout_s);
  } else {
    const kernels::NcclOptions nccl = nccl_options(env_, options_);
    made = kernels::make_nccl_communicator(backend, payload_, env_.rank, env_.world, nccl);
  }
  std::lock_guard<std::mutex> lock(communicator_mutex_);
  communicator_ = std::move(made);
  if (monitor_ && monitor_->failed()) communicator_->abort(monitor_->failure());
  return communicator_.get();
}

void ProcessGroup::release_others() {
  if (monitor_ && env_.rank == 0) monitor_->release();
}

void ProcessGroup::wait_for_rank0() {
  if (monitor_ && env_.rank != 0) monitor_->wait_for_release();
}

void ProcessGroup::report_failure(const std::string& message) {
  failed_.store(true);
  if (monitor_) monitor_->report_failure(message);
}

}  // namespace lseq::dist
