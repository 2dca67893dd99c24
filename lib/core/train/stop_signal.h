#pragma once
// SIGINT/SIGTERM ask a long run to stop at the next safe point (lstrain saves a checkpoint, then exits).
// A second signal while stopping restores the default action, so a stuck run can still be killed.
namespace lseq {

void install_stop_signal_handlers();
bool stop_requested();
int stop_signal_number();  // the signal that asked, 0 when none

}  // namespace lseq
