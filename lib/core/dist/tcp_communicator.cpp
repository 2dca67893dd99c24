#include "core/dist/tcp_communicator.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/float_convert.h"
#include "util/error.h"

namespace lseq::dist {

using kernels::DType;

namespace {

constexpr std::size_t kChunkBytes = std::size_t(16) << 20;  // a star step's slice: bounds the temporaries

struct Header {
  uint64_t sequence;
  uint64_t bytes;
};

TcpCommunicator::Elem elem_of(DType dt) {
  switch (dt) {
    case DType::f32: return TcpCommunicator::Elem::f32;
    case DType::f16: return TcpCommunicator::Elem::f16;
    case DType::bf16: return TcpCommunicator::Elem::bf16;
  }
  return TcpCommunicator::Elem::f32;
}

std::size_t elem_bytes(TcpCommunicator::Elem e) {
  return e == TcpCommunicator::Elem::f64 ? 8 : e == TcpCommunicator::Elem::f32 ? 4 : 2;
}

float load(TcpCommunicator::Elem e, const char* p, std::size_t i) {
  switch (e) {
    case TcpCommunicator::Elem::f32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case TcpCommunicator::Elem::f16:
    case TcpCommunicator::Elem::bf16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return e == TcpCommunicator::Elem::f16 ? kernels::f16_to_float(h) : kernels::bf16_to_float(h);
    }
    case TcpCommunicator::Elem::f64: break;
  }
  return 0.0f;
}

void store(TcpCommunicator::Elem e, char* p, std::size_t i, float v) {
  if (e == TcpCommunicator::Elem::f32) {
    std::memcpy(p + 4 * i, &v, 4);
    return;
  }
  const uint16_t h = e == TcpCommunicator::Elem::f16 ? kernels::float_to_f16(v) : kernels::float_to_bf16(v);
  std::memcpy(p + 2 * i, &h, 2);
}

// out[i] = sum over the `parts` (in the given order) of element i: fp32 (double for f64), rounded once to e.
void sum_in_order(TcpCommunicator::Elem e, const std::vector<const char*>& parts, std::size_t n, char* out) {
  if (e == TcpCommunicator::Elem::f64) {
    for (std::size_t i = 0; i < n; ++i) {
      double acc = 0, v;
      for (std::size_t q = 0; q < parts.size(); ++q) {
        std::memcpy(&v, parts[q] + 8 * i, 8);
        acc = q == 0 ? v : acc + v;
      }
      std::memcpy(out + 8 * i, &acc, 8);
    }
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    float acc = load(e, parts[0], i);
    for (std::size_t q = 1; q < parts.size(); ++q) acc += load(e, parts[q], i);
    store(e, out, i, acc);
  }
}

}  // namespace

std::vector<Socket> connect_mesh(int rank, const std::vector<RankAddress>& ranks, const Socket& listener,
                                 double timeout_s) {
  const int world = static_cast<int>(ranks.size());
  std::vector<Socket> peers(ranks.size());
  for (int q = 0; q < rank; ++q) {
    const RankAddress& a = ranks[static_cast<std::size_t>(q)];
    Socket s = connect_within(a.host, a.port, timeout_s, fmt::format("rank {}'s data port {}:{}", q, a.host, a.port));
    const uint32_t me = static_cast<uint32_t>(rank);
    send_exact(s, &me, sizeof me, timeout_s, fmt::format("rank {}", q));
    peers[static_cast<std::size_t>(q)] = std::move(s);
  }
  const double deadline = steady_seconds() + timeout_s;
  for (int arrived = rank + 1; arrived < world; ++arrived) {
    Socket s = accept_within(listener, deadline - steady_seconds());
    if (!s.valid()) fail("rank {}: the higher ranks did not connect to its data port within {:.0f} s", rank, timeout_s);
    uint32_t from = 0;
    recv_exact(s, &from, sizeof from, timeout_s, "a connecting rank");
    if (static_cast<int>(from) <= rank || static_cast<int>(from) >= world || peers[from].valid()) {
      fail("rank {}: an unexpected connection claims rank {} on its data port", rank, from);
    }
    peers[from] = std::move(s);
  }
  return peers;
}

TcpCommunicator::TcpCommunicator(int rank, int world, std::vector<Socket> peers, double timeout_s)
    : rank_(rank), world_(world), peers_(std::move(peers)), timeout_s_(timeout_s) {
  if (static_cast<int>(peers_.size()) != world_) {
    fail("internal error: {} peer sockets for {} ranks", peers_.size(), world_);
  }
  for (int q = 0; q < world_; ++q) {
    if (q == rank_) continue;
    if (!peers_[static_cast<std::size_t>(q)].valid()) fail("internal error: no connection to rank {}", q);
    peers_[static_cast<std::size_t>(q)].set_nonblocking();
  }
  worker_ = std::thread([this] { run(); });
}

TcpCommunicator::~TcpCommunicator() {
  bool in_flight;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    in_flight = busy_ || !tasks_.empty();
    tasks_.clear();
  }
  // A collective still running (this rank is leaving on an error) would wait for its peers up to the time-out: end
  // it now. With nothing in flight the sockets close normally, so the peers still get every byte sent.
  if (in_flight) abort("the communicator was closed during a collective");
  changed_.notify_all();
  worker_.join();
}

void TcpCommunicator::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, nothing left
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    busy_ = true;
    lock.unlock();
    std::string failure;
    try {
      task();
    } catch (const std::exception& e) {
      failure = e.what();
    }
    lock.lock();
    busy_ = false;
    if (!failure.empty()) {
      if (error_.empty()) error_ = aborted_.empty() ? failure : aborted_;
      tasks_.clear();
    }
    changed_.notify_all();
  }
}

void TcpCommunicator::enqueue(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!error_.empty()) throw Error(error_);
    tasks_.push_back(std::move(task));
  }
  changed_.notify_all();
}

void TcpCommunicator::wait() {
  const double start = steady_seconds();
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return (tasks_.empty() && !busy_) || !error_.empty(); });
  waited_ += steady_seconds() - start;
  if (!error_.empty()) throw Error(error_);
}

void TcpCommunicator::abort(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (aborted_.empty()) aborted_ = reason;
    if (error_.empty()) error_ = reason;
  }
  for (const Socket& s : peers_) s.shutdown();  // a collective blocked on a peer fails now
  changed_.notify_all();
}

void TcpCommunicator::rethrow_failure(const std::string& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  throw Error(aborted_.empty() ? message : aborted_);
}

void TcpCommunicator::check_offsets(const std::vector<std::size_t>& offsets) const {
  if (static_cast<int>(offsets.size()) != world_ + 1 || !std::is_sorted(offsets.begin(), offsets.end())) {
    fail("internal error: a collective's ranges need {} ascending offsets", world_ + 1);
  }
}

void TcpCommunicator::exchange(const std::vector<Move>& sends, const std::vector<Move>& receives) {
  struct Flow {
    Move move;
    bool send;
    Header header;
    std::size_t done = 0;  // bytes of header + payload moved
    std::size_t total() const { return sizeof(Header) + move.bytes; }
  };
  const uint64_t sequence = ++sequence_;
  std::vector<Flow> flows;
  for (const Move& m : sends) flows.push_back({m, true, {sequence, m.bytes}});
  for (const Move& m : receives) flows.push_back({m, false, {0, 0}});
  std::size_t pending = flows.size();
  while (pending > 0) {
    std::vector<pollfd> fds;
    for (const Flow& f : flows) {
      if (f.done == f.total()) continue;
      const int fd = peers_[static_cast<std::size_t>(f.move.peer)].fd();
      auto it = std::find_if(fds.begin(), fds.end(), [&](const pollfd& p) { return p.fd == fd; });
      if (it == fds.end()) it = fds.insert(fds.end(), pollfd{fd, 0, 0});
      it->events |= f.send ? POLLOUT : POLLIN;
    }
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(timeout_s_ * 1000.0));
    if (ready < 0) {
      if (errno == EINTR) continue;
      rethrow_failure(fmt::format("rank {}: waiting for the other ranks failed: {}", rank_, std::strerror(errno)));
    }
    if (ready == 0) {
      std::string waiting;
      for (const Flow& f : flows)
        if (f.done < f.total()) waiting += fmt::format("{}rank {}", waiting.empty() ? "" : ", ", f.move.peer);
      rethrow_failure(fmt::format("rank {}: no data moved to or from {} for {:.0f} s (--dist-timeout): a rank hangs "
                                  "or stopped", rank_, waiting, timeout_s_));
    }
    for (Flow& f : flows) {
      if (f.done == f.total()) continue;
      const Socket& s = peers_[static_cast<std::size_t>(f.move.peer)];
      const auto p = std::find_if(fds.begin(), fds.end(), [&](const pollfd& x) { return x.fd == s.fd(); });
      if (p->revents == 0) continue;
      if (f.send && !(p->revents & (POLLOUT | POLLERR | POLLHUP))) continue;
      if (!f.send && !(p->revents & (POLLIN | POLLERR | POLLHUP))) continue;
      while (f.done < f.total()) {
        const bool in_header = f.done < sizeof(Header);
        char* at = in_header ? reinterpret_cast<char*>(&f.header) + f.done : f.move.data + (f.done - sizeof(Header));
        const std::size_t left = in_header ? sizeof(Header) - f.done : f.total() - f.done;
        const ssize_t n = f.send ? ::send(s.fd(), at, left, MSG_NOSIGNAL | MSG_DONTWAIT)
                                 : ::recv(s.fd(), at, left, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
        if (n <= 0) {
          rethrow_failure(fmt::format("rank {}: rank {} closed its connection during a collective: it stopped or "
                                      "crashed", rank_, f.move.peer));
        }
        f.done += static_cast<std::size_t>(n);
        if (!f.send && f.done == sizeof(Header) &&
            (f.header.sequence != sequence || f.header.bytes != f.move.bytes)) {
          rethrow_failure(fmt::format("internal error: rank {} sent {} bytes of collective step {} where rank {} "
                                      "expected {} bytes of step {} (the ranks issue different collectives)",
                                      f.move.peer, f.header.bytes, f.header.sequence, rank_, f.move.bytes, sequence));
        }
      }
      if (f.done == f.total()) --pending;
    }
  }
}

void TcpCommunicator::star_sum(Elem e, char* data, std::size_t count) {
  const std::size_t es = elem_bytes(e), chunk = std::max<std::size_t>(1, kChunkBytes / es);
  std::vector<char> received;
  for (std::size_t a = 0; a < count; a += chunk) {
    const std::size_t n = std::min(chunk, count - a), bytes = n * es;
    char* slice = data + a * es;
    if (rank_ == 0) {
      received.resize((world_ - 1) * bytes);
      std::vector<Move> from;
      std::vector<const char*> parts{slice};
      for (int q = 1; q < world_; ++q) {
        char* at = received.data() + (q - 1) * bytes;
        from.push_back({q, at, bytes});
        parts.push_back(at);
      }
      exchange({}, from);
      sum_in_order(e, parts, n, slice);
      std::vector<Move> to;
      for (int q = 1; q < world_; ++q) to.push_back({q, slice, bytes});
      exchange(to, {});
    } else {
      exchange({{0, slice, bytes}}, {});
      exchange({}, {{0, slice, bytes}});
    }
  }
}

void TcpCommunicator::owner_sum(Elem e, char* data, const std::vector<std::size_t>& offsets) {
  const std::size_t es = elem_bytes(e), chunk = std::max<std::size_t>(1, kChunkBytes / es);
  std::size_t longest = 0;
  for (int r = 0; r < world_; ++r) longest = std::max(longest, offsets[r + 1] - offsets[r]);
  std::vector<char> received;
  for (std::size_t k = 0; k * chunk < longest; ++k) {
    auto slice = [&](int r, std::size_t& begin, std::size_t& n) {
      begin = std::min(offsets[r] + k * chunk, offsets[r + 1]);
      n = std::min(offsets[r + 1], begin + chunk) - begin;
    };
    std::vector<Move> to, from;
    for (int q = 0; q < world_; ++q) {
      std::size_t begin, n;
      slice(q, begin, n);
      if (q != rank_ && n > 0) to.push_back({q, data + begin * es, n * es});
    }
    std::size_t mine, n;
    slice(rank_, mine, n);
    std::vector<const char*> parts;
    if (n > 0) {
      received.resize(world_ * n * es);
      for (int q = 0; q < world_; ++q) {
        char* at = q == rank_ ? data + mine * es : received.data() + q * n * es;
        if (q != rank_) from.push_back({q, at, n * es});
        parts.push_back(at);
      }
    }
    exchange(to, from);
    if (n > 0) sum_in_order(e, parts, n, data + mine * es);
  }
}

void TcpCommunicator::all_reduce(DType dt, void* data, std::size_t count) {
  if (world_ == 1 || count == 0) return enqueue([] {});
  enqueue([this, dt, data, count] { star_sum(elem_of(dt), static_cast<char*>(data), count); });
}

void TcpCommunicator::reduce_scatter(DType dt, void* data, const std::vector<std::size_t>& offsets) {
  check_offsets(offsets);
  if (world_ == 1) return enqueue([] {});
  enqueue([this, dt, data, offsets] { owner_sum(elem_of(dt), static_cast<char*>(data), offsets); });
}

void TcpCommunicator::all_gather(DType dt, void* data, const std::vector<std::size_t>& offsets) {
  check_offsets(offsets);
  if (world_ == 1) return enqueue([] {});
  enqueue([this, dt, data, offsets] {
    const std::size_t es = kernels::dtype_size(dt);
    char* base = static_cast<char*>(data);
    std::vector<Move> to, from;
    const std::size_t mine = offsets[rank_ + 1] - offsets[rank_];
    for (int q = 0; q < world_; ++q) {
      if (q == rank_) continue;
      if (mine > 0) to.push_back({q, base + offsets[rank_] * es, mine * es});
      const std::size_t theirs = offsets[q + 1] - offsets[q];
      if (theirs > 0) from.push_back({q, base + offsets[q] * es, theirs * es});
    }
    exchange(to, from);
  });
}

void TcpCommunicator::broadcast(DType dt, void* data, std::size_t count, int root) {
  if (root < 0 || root >= world_) fail("internal error: broadcast from rank {} in a world of {}", root, world_);
  if (world_ == 1 || count == 0) return enqueue([] {});
  enqueue([this, dt, data, count, root] {
    const std::size_t bytes = count * kernels::dtype_size(dt);
    char* p = static_cast<char*>(data);
    if (rank_ == root) {
      std::vector<Move> to;
      for (int q = 0; q < world_; ++q)
        if (q != root) to.push_back({q, p, bytes});
      exchange(to, {});
    } else {
      exchange({}, {{root, p, bytes}});
    }
  });
}

void TcpCommunicator::sum_host(std::vector<double>& values) {
  if (world_ > 1 && !values.empty()) {
    enqueue([this, &values] { star_sum(Elem::f64, reinterpret_cast<char*>(values.data()), values.size()); });
  }
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return (tasks_.empty() && !busy_) || !error_.empty(); });
  if (!error_.empty()) throw Error(error_);
}

}  // namespace lseq::dist
