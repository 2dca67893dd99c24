#pragma once
// SIGINT and SIGTERM in lstrain. While it sets up (options, vocabularies, corpus cache, memory plan: nothing to
// save yet, and some steps can block or take long, such as opening a FIFO or planning a huge model) a signal ends
// the program at once with one line on stderr and the shell's exit code (130 or 143). Once training runs
// (defer_stop_signals), a signal asks it to stop at the next safe point: lstrain saves a checkpoint, then exits.
// A second signal while stopping restores the default action, so a stuck run can still be killed.
namespace lseq {

void install_stop_signal_handlers();  // immediate mode
void defer_stop_signals();            // from now on a signal is a request to stop
bool stop_requested();
int stop_signal_number();  // the signal that asked, 0 when none

}  // namespace lseq
