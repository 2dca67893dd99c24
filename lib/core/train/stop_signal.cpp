#include "core/train/stop_signal.h"

#include <atomic>
#include <csignal>

namespace lseq {

namespace {
std::atomic<int> g_signal{0};

extern "C" void on_stop_signal(int signal) {
  if (g_signal.exchange(signal) != 0) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
  }
}
}  // namespace

void install_stop_signal_handlers() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
}

bool stop_requested() { return g_signal.load() != 0; }
int stop_signal_number() { return g_signal.load(); }

}  // namespace lseq
