#include "core/dist/local_launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <thread>

#include "core/dist/socket.h"
#include "util/error.h"

namespace lseq::dist {

namespace {

std::atomic<int> g_pending_signal{0};
std::atomic<int> g_signal_count{0};

extern "C" void on_launcher_signal(int signal) {
  g_pending_signal.store(signal);
  g_signal_count.fetch_add(1);
}

int free_port() {
  Socket s = listen_on(0, "a free port for the ranks' rendezvous");
  return bound_port(s);
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string describe(int status) {
  if (WIFSIGNALED(status)) {
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  }
  return fmt::format("exited with code {}", exit_code_of(status));
}

}  // namespace

std::vector<std::string> own_arguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::string current;
  for (char c : all) {
    if (c == '\0') {
      args.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) args.push_back(current);
  if (args.empty()) fail("cannot read this program's arguments from /proc/self/cmdline");
  args.erase(args.begin());
  return args;
}

int run_local_ranks(const LocalLaunchOptions& options) {
  const int ranks = options.ranks;
  const std::vector<std::string> args = own_arguments();
  const int port = free_port();
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction action {};
    action.sa_handler = on_launcher_signal;
    sigemptyset(&action.sa_mask);
    ::sigaction(sig, &action, nullptr);
  }
  std::vector<pid_t> children(static_cast<std::size_t>(ranks), -1);
  std::vector<bool> running(static_cast<std::size_t>(ranks), false);
  const pid_t launcher = ::getpid();
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (int q = 0; q < r; ++q) ::kill(children[static_cast<std::size_t>(q)], SIGKILL);
      fail("cannot start rank {}: fork failed: {}", r, std::strerror(errno));
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != launcher) ::_exit(143);  // the launcher died before prctl took effect
      for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::signal(sig, SIG_DFL);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(ranks).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(ranks).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("LSEQ_LAUNCHER", "lstrain --devices", 1);
      std::vector<char*> argv;
      std::string self = "/proc/self/exe";
      argv.push_back(self.data());
      std::vector<std::string> copy = args;
      for (std::string& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv("/proc/self/exe", argv.data());
      const std::string line = fmt::format("error: cannot start rank {}: {}\n", r, std::strerror(errno));
      ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
      (void)ignored;
      ::_exit(127);
    }
    children[static_cast<std::size_t>(r)] = pid;
    running[static_cast<std::size_t>(r)] = true;
  }

  int first_failed = -1, first_status = 0, common_code = 0, alive = ranks, forwarded = 0;
  bool first_is_own = false;  // first_failed failed on its own, not because another rank did
  double kill_at = 0;
  while (alive > 0) {
    const int signals = g_signal_count.load();
    if (signals > forwarded) {
      const int sig = g_pending_signal.load();
      for (int r = 0; r < ranks; ++r)
        if (running[static_cast<std::size_t>(r)]) ::kill(children[static_cast<std::size_t>(r)], sig);
      forwarded = signals;
    }
    // Every child that has ended since the last look. The others stop within milliseconds of a failure, so
    // several may have ended together: a rank killed by a signal is then the one to name (the others exited on
    // seeing it go), else one that failed on its own (the others exit with kExitOtherRankFailed).
    int failed_now = -1, failed_status = 0;
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      for (int r = 0; r < ranks; ++r) {
        if (children[static_cast<std::size_t>(r)] != pid) continue;
        running[static_cast<std::size_t>(r)] = false;
        --alive;
        const int code = exit_code_of(status);
        if (code != 0 && common_code == 0) common_code = code;
        // Preference: killed by a signal, then an error of its own, then stopped because of another rank.
        auto rank_of = [](int s) { return WIFSIGNALED(s) ? 2 : exit_code_of(s) == kExitOtherRankFailed ? 0 : 1; };
        if (code != 0 && (failed_now < 0 || rank_of(status) > rank_of(failed_status))) {
          failed_now = r;
          failed_status = status;
        }
      }
    }
    // A rank that fails on its own (not on a forwarded signal) is the one to name. One that stopped because another
    // rank failed (kExitOtherRankFailed) may be reaped before the rank that failed: it is named only if no rank
    // with a failure of its own ends by the time the others are killed.
    if (failed_now >= 0 && forwarded == 0) {
      const bool own_failure = WIFSIGNALED(failed_status) || exit_code_of(failed_status) != kExitOtherRankFailed;
      if (first_failed < 0 || (own_failure && !first_is_own)) {
        first_failed = failed_now;
        first_status = failed_status;
        first_is_own = own_failure;
      }
      if (kill_at == 0) kill_at = steady_seconds() + options.grace_s;
    }
    if (first_failed >= 0 && kill_at > 0 && steady_seconds() > kill_at) {
      for (int r = 0; r < ranks; ++r)
        if (running[static_cast<std::size_t>(r)]) ::kill(children[static_cast<std::size_t>(r)], SIGKILL);
      kill_at = steady_seconds() + 3600;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (first_failed >= 0) {
    const std::string label = static_cast<std::size_t>(first_failed) < options.labels.size()
                                  ? " (" + options.labels[static_cast<std::size_t>(first_failed)] + ")"
                                  : "";
    std::cerr << fmt::format("error: rank {}{} {}; the other ranks were stopped", first_failed, label,
                             describe(first_status))
              << std::endl;
    return exit_code_of(first_status);
  }
  return common_code;
}

}  // namespace lseq::dist
