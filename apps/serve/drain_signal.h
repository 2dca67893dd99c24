#pragma once
// SIGTERM and SIGINT in lsserve. Until arm() (the model is still loading: nothing is served yet) a signal ends the
// program at once, with one line on stderr and the shell's exit code (143 or 130). Once armed, the first signal
// asks for a drain (wait() returns it: lsserve refuses new requests, answers those it has and exits 0); a second
// one while draining ends the program at once with the shell's code, so that a stuck drain can still be stopped.
// The handler only writes to a pipe: whatever thread the signal lands on (the BLAS library's own included), the
// drain runs on the thread that waits.
namespace lseq {

class DrainSignal {
 public:
  DrainSignal();   // installs the handlers (one DrainSignal at a time) and ignores SIGPIPE
  ~DrainSignal();  // restores the default actions
  DrainSignal(const DrainSignal&) = delete;
  DrainSignal& operator=(const DrainSignal&) = delete;

  void arm();
  int wait();      // blocks until a signal asks for a drain (its number) or release() is called (0)
  void release();  // wakes wait() without a signal (lsserve ends for another reason)
};

}  // namespace lseq
