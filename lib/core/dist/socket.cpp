#include "core/dist/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "util/error.h"

namespace lseq::dist {

namespace {

std::string reason(int err) { return std::strerror(err); }

// Milliseconds for poll(2) from seconds (at least 1 when positive, capped at a day).
int poll_ms(double seconds) { return static_cast<int>(std::clamp(seconds * 1000.0, 1.0, 86400000.0)); }

void tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

double steady_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

Socket& Socket::operator=(Socket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void Socket::shutdown() const {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::set_nonblocking() const {
  const int flags = ::fcntl(fd_, F_GETFL, 0);
  ::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
}

Socket listen_on(int port, const std::string& what) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) fail("cannot create a TCP socket: {}", reason(errno));
  int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    fail("cannot listen on TCP port {} ({}): {}{}", port, what, reason(err),
         err == EADDRINUSE ? "; another job uses it: choose another port" : "");
  }
  if (::listen(s.fd(), 256) != 0) fail("cannot listen on TCP port {} ({}): {}", port, what, reason(errno));
  return s;
}

int bound_port(const Socket& listener) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(listener.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    fail("cannot read a socket's port: {}", reason(errno));
  }
  return ntohs(addr.sin_port);
}

Socket accept_within(const Socket& listener, double timeout_s) {
  const double deadline = steady_seconds() + timeout_s;
  for (;;) {
    pollfd p{listener.fd(), POLLIN, 0};
    const int ready = ::poll(&p, 1, poll_ms(deadline - steady_seconds()));
    if (ready < 0 && errno != EINTR) fail("waiting for connections failed: {}", reason(errno));
    if (ready > 0) {
      Socket s(::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
      if (s.valid()) {
        tune(s.fd());
        return s;
      }
      if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) {
        fail("accepting a connection failed: {}", reason(errno));
      }
    }
    if (steady_seconds() >= deadline) return Socket();
  }
}

Socket connect_within(const std::string& host, int port, double timeout_s, const std::string& what) {
  const double deadline = steady_seconds() + timeout_s;
  std::string last = "no attempt";
  for (int attempt = 0;; ++attempt) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc != 0) {
      last = std::string("cannot resolve the host name: ") + ::gai_strerror(rc);
    } else {
      for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
        if (!s.valid()) continue;
        // A non-blocking connect bounded by the remaining time (an unroutable host would block for minutes).
        s.set_nonblocking();
        int err = 0;
        if (::connect(s.fd(), a->ai_addr, a->ai_addrlen) != 0) {
          err = errno;
          if (err == EINPROGRESS) {
            pollfd p{s.fd(), POLLOUT, 0};
            const int ready = ::poll(&p, 1, poll_ms(std::min(5.0, std::max(0.0, deadline - steady_seconds()))));
            socklen_t len = sizeof err;
            if (ready > 0) {
              ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
            } else {
              err = ETIMEDOUT;
            }
          }
        }
        if (err == 0) {
          const int flags = ::fcntl(s.fd(), F_GETFL, 0);
          ::fcntl(s.fd(), F_SETFL, flags & ~O_NONBLOCK);
          tune(s.fd());
          ::freeaddrinfo(found);
          return s;
        }
        last = reason(err);
      }
      ::freeaddrinfo(found);
    }
    if (steady_seconds() >= deadline) {
      fail("cannot reach {} within {:.0f} s: {}; check the address and port, and that rank 0 runs", what, timeout_s,
           last);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(attempt < 20 ? 50 : 250));
  }
}

std::string peer_address(const Socket& s) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  char text[INET_ADDRSTRLEN] = {0};
  ::inet_ntop(AF_INET, &addr.sin_addr, text, sizeof text);
  return text;
}

void send_exact(const Socket& s, const void* data, std::size_t bytes, double timeout_s, const std::string& peer) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    pollfd w{s.fd(), POLLOUT, 0};
    const int ready = ::poll(&w, 1, poll_ms(timeout_s));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) fail("{} accepted no data for {:.0f} s: it may hang", peer, timeout_s);
    const ssize_t n = ::send(s.fd(), p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      fail("{} closed its connection ({}): it stopped or crashed", peer, reason(errno));
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

void recv_exact(const Socket& s, void* data, std::size_t bytes, double timeout_s, const std::string& peer) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    pollfd r{s.fd(), POLLIN, 0};
    const int ready = ::poll(&r, 1, poll_ms(timeout_s));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) fail("{} sent nothing for {:.0f} s: it may hang", peer, timeout_s);
    const ssize_t n = ::recv(s.fd(), p, bytes, MSG_DONTWAIT);
    if (n == 0) fail("{} closed its connection: it stopped or crashed", peer);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      fail("{} closed its connection ({}): it stopped or crashed", peer, reason(errno));
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
}

}  // namespace lseq::dist
