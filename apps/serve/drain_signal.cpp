#include "drain_signal.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "util/error.h"

namespace lseq {

namespace {

int g_pipe[2] = {-1, -1};
std::atomic<bool> g_armed{false};
std::atomic<int> g_signals{0};

// Only async-signal-safe calls here: write(2), signal, raise, _exit.
extern "C" void on_drain_signal(int signal) {
  if (!g_armed.load()) {
    const char* text = signal == SIGINT ? "error: interrupted (SIGINT) while lsserve was starting\n"
                                        : "error: terminated (SIGTERM) while lsserve was starting\n";
    ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
    (void)ignored;
    ::_exit(128 + signal);
  }
  if (g_signals.fetch_add(1) > 0) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  const unsigned char byte = static_cast<unsigned char>(signal);
  ssize_t ignored = ::write(g_pipe[1], &byte, 1);
  (void)ignored;
}

}  // namespace

DrainSignal::DrainSignal() {
  if (g_pipe[0] >= 0) fail("internal: a second DrainSignal");
  if (::pipe(g_pipe) != 0) fail("cannot create the signal pipe: {}", std::strerror(errno));
  g_armed.store(false);
  g_signals.store(0);
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGINT, on_drain_signal);
  std::signal(SIGTERM, on_drain_signal);
}

DrainSignal::~DrainSignal() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  ::close(g_pipe[0]);
  ::close(g_pipe[1]);
  g_pipe[0] = g_pipe[1] = -1;
}

void DrainSignal::arm() { g_armed.store(true); }

int DrainSignal::wait() {
  unsigned char byte = 0;
  while (true) {
    const ssize_t got = ::read(g_pipe[0], &byte, 1);
    if (got == 1) return byte;
    if (got < 0 && errno == EINTR) continue;
    return 0;
  }
}

void DrainSignal::release() {
  const unsigned char byte = 0;
  ssize_t ignored = ::write(g_pipe[1], &byte, 1);
  (void)ignored;
}

}  // namespace lseq
