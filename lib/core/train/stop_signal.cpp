#include "core/train/stop_signal.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

namespace lseq {

namespace {
std::atomic<int> g_signal{0};
std::atomic<bool> g_deferred{false};

// Only async-signal-safe calls here: write(2) of a fixed text, then _exit.
void exit_now(int signal) {
  const char* text = signal == SIGINT ? "error: interrupted (SIGINT) before training started; nothing to save\n"
                                      : "error: terminated (SIGTERM) before training started; nothing to save\n";
  ssize_t ignored = ::write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
  ::_exit(128 + signal);
}

extern "C" void on_stop_signal(int signal) {
  if (!g_deferred.load()) exit_now(signal);
  if (g_signal.exchange(signal) != 0) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}
}  // namespace

void install_stop_signal_handlers() {
  g_deferred.store(false);
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

void defer_stop_signals() { g_deferred.store(true); }

bool stop_requested() { return g_signal.load() != 0; }
int stop_signal_number() { return g_signal.load(); }

}  // namespace lseq
