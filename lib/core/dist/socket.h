#pragma once
// TCP over IPv4 for the rendezvous, the rank-failure monitor and the CPU communicator: a socket that closes itself,
// listening and connecting with time-outs, and exact sends and receives that fail with one line naming the peer
// (closed connection, time-out, system error) instead of blocking for ever. Sends never raise SIGPIPE.
#include <cstddef>
#include <string>

namespace lseq::dist {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Socket& operator=(Socket&& o) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();
  // Wakes every thread blocked on the socket (their calls then fail or see the end); the fd stays open.
  void shutdown() const;
  void set_nonblocking() const;

 private:
  int fd_ = -1;
};

// Listens on all interfaces; port 0 picks a free one. Fails naming the port and the reason (e.g. in use) and
// `what` (the option or variable that chose the port).
Socket listen_on(int port, const std::string& what);
int bound_port(const Socket& listener);
// The next connection within timeout_s; an invalid socket when none came.
Socket accept_within(const Socket& listener, double timeout_s);
// Connects to host:port, retrying while the listener is not up yet (refused, unreachable) until timeout_s; fails
// naming `what` (e.g. "the master 10.0.0.1:29500 (MASTER_ADDR, MASTER_PORT)") and the last reason.
Socket connect_within(const std::string& host, int port, double timeout_s, const std::string& what);
// The peer's IPv4 address as text.
std::string peer_address(const Socket& s);

// Exactly `bytes` bytes, failing when nothing moves for timeout_s seconds or the peer closes; messages name `peer`.
void send_exact(const Socket& s, const void* data, std::size_t bytes, double timeout_s, const std::string& peer);
void recv_exact(const Socket& s, void* data, std::size_t bytes, double timeout_s, const std::string& peer);

// Seconds on a steady clock (time-outs, durations).
double steady_seconds();

}  // namespace lseq::dist
