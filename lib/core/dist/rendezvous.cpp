#include "core/dist/rendezvous.h"

#include <cstdint>
#include <cstring>

#include "util/error.h"

namespace lseq::dist {

namespace {

constexpr char kMagic[8] = {'l', 's', 'e', 'q', 'd', 'p', '0', '1'};
constexpr uint32_t kMaxText = 1 << 16;

// A small message: u32 fields and length-prefixed strings, in the host's byte order (every supported host is
// little-endian).
struct Writer {
  std::string bytes;
  void u32(uint32_t v) { bytes.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void text(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes += s;
  }
};

struct Reader {
  const Socket& s;
  double timeout;
  std::string peer;
  uint32_t u32() {
    uint32_t v = 0;
    recv_exact(s, &v, sizeof v, timeout, peer);
    return v;
  }
  std::string text() {
    const uint32_t n = u32();
    if (n > kMaxText) fail("{} sent a malformed start-up message (is it an lstrain of this version?)", peer);
    std::string v(n, '\0');
    if (n > 0) recv_exact(s, v.data(), n, timeout, peer);
    return v;
  }
};

struct Hello {
  int rank = 0, world = 0, data_port = 0;
  std::string kind, fingerprint;
};

void send_message(const Socket& s, const Writer& w, double timeout, const std::string& peer) {
  const uint32_t n = static_cast<uint32_t>(w.bytes.size());
  send_exact(s, &n, sizeof n, timeout, peer);
  send_exact(s, w.bytes.data(), w.bytes.size(), timeout, peer);
}

std::string list_ranks(const std::vector<int>& ranks) {
  std::string text;
  for (std::size_t i = 0; i < ranks.size() && i < 8; ++i) text += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > 8) text += fmt::format(" and {} more", ranks.size() - 8);
  return text;
}

// Rank 0 tells every connected rank why the job cannot start, then fails with the same line.
[[noreturn]] void refuse(std::vector<Socket>& connected, const std::string& why) {
  Writer w;
  w.u32(1);
  w.text(why);
  for (Socket& s : connected) {
    if (!s.valid()) continue;
    try {
      send_message(s, w, 2.0, "a rank");
    } catch (const Error&) {
    }
  }
  throw Error(why);
}

Rendezvous serve(const LaunchEnv& env, const RendezvousOptions& o) {
  const std::string where = fmt::format("MASTER_PORT={}", env.master_port);
  Socket listener = listen_on(env.master_port, where);
  Rendezvous result;
  result.control.resize(static_cast<std::size_t>(env.world));
  result.ranks.resize(static_cast<std::size_t>(env.world));
  result.ranks[0] = {env.master_addr, o.data_port};
  result.payload = o.payload;
  std::vector<Socket> pending;  // connected, not yet identified (refused ones are told why)
  int arrived = 1;
  const double deadline = steady_seconds() + o.timeout_s;
  while (arrived < env.world) {
    Socket s = accept_within(listener, deadline - steady_seconds());
    if (!s.valid()) {
      std::vector<int> missing;
      for (int r = 1; r < env.world; ++r)
        if (!result.control[static_cast<std::size_t>(r)].valid()) missing.push_back(r);
      refuse(result.control, fmt::format("rank 0: rank{} {} of {} did not connect to port {} within {:.0f} s; launch "
                                         "every rank with the same MASTER_ADDR and MASTER_PORT",
                                         missing.size() > 1 ? "s" : "", list_ranks(missing), env.world,
                                         env.master_port, o.timeout_s));
    }
    Hello h;
    const std::string host = peer_address(s);
    try {
      Reader r{s, 10.0, "a connection from " + host};
      const uint32_t length = r.u32();
      char magic[sizeof kMagic];
      if (length < sizeof kMagic) fail("short");
      recv_exact(s, magic, sizeof magic, 10.0, r.peer);
      if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) fail("not lstrain");
      h.rank = static_cast<int>(r.u32());
      h.world = static_cast<int>(r.u32());
      h.data_port = static_cast<int>(r.u32());
      h.kind = r.text();
      h.fingerprint = r.text();
    } catch (const Error&) {
      continue;  // a stray connection (a port scanner, another program): not a rank of this job
    }
    auto refuse_with = [&](const std::string& why) {
      result.control.push_back(std::move(s));
      refuse(result.control, why);
    };
    if (h.world != env.world) {
      refuse_with(fmt::format("rank {} (host {}) was launched with a world of {} ranks, rank 0 with {}: give every "
                              "rank the same WORLD_SIZE", h.rank, host, h.world, env.world));
    }
    if (h.rank <= 0 || h.rank >= env.world || result.control[static_cast<std::size_t>(h.rank)].valid()) {
      refuse_with(fmt::format("two processes claim rank {} (one on host {}): give every process its own RANK",
                              h.rank, host));
    }
    if (h.kind != o.kind) {
      refuse_with(fmt::format("rank {} (host {}) trains on the {}, rank 0 on the {}: every rank must use the same "
                              "backend (--cpu on all or on none)", h.rank, host, h.kind, o.kind));
    }
    if (h.fingerprint != o.fingerprint) {
      refuse_with(fmt::format("rank {} (host {}) runs '{}', rank 0 '{}': launch the same lstrain on every rank",
                              h.rank, host, h.fingerprint, o.fingerprint));
    }
    result.ranks[static_cast<std::size_t>(h.rank)] = {host, h.data_port};
    result.control[static_cast<std::size_t>(h.rank)] = std::move(s);
    ++arrived;
  }
  Writer w;
  w.u32(0);
  w.text(result.payload);
  for (const RankAddress& a : result.ranks) {
    w.text(a.host);
    w.u32(static_cast<uint32_t>(a.port));
  }
  for (int r = 1; r < env.world; ++r) {
    send_message(result.control[static_cast<std::size_t>(r)], w, o.timeout_s, fmt::format("rank {}", r));
  }
  return result;
}

Rendezvous join(const LaunchEnv& env, const RendezvousOptions& o) {
  const std::string master = fmt::format("the master {}:{} (MASTER_ADDR, MASTER_PORT)", env.master_addr,
                                         env.master_port);
  Rendezvous result;
  result.control.push_back(connect_within(env.master_addr, env.master_port, o.timeout_s, master));
  const Socket& s = result.control[0];
  Writer hello;
  hello.bytes.append(kMagic, sizeof kMagic);
  hello.u32(static_cast<uint32_t>(env.rank));
  hello.u32(static_cast<uint32_t>(env.world));
  hello.u32(static_cast<uint32_t>(o.data_port));
  hello.text(o.kind);
  hello.text(o.fingerprint);
  send_message(s, hello, o.timeout_s, "rank 0");
  // Rank 0 answers when every rank has come: allow its whole wait, and a little more.
  Reader r{s, o.timeout_s + 30.0, "rank 0"};
  try {
    r.u32();  // length
  } catch (const Error& e) {
    fail("rank {}: rank 0 at {}:{} gave no start-up answer ({})", env.rank, env.master_addr, env.master_port,
         e.what());
  }
  if (r.u32() != 0) fail("{}", r.text());
  result.payload = r.text();
  result.ranks.resize(static_cast<std::size_t>(env.world));
  for (RankAddress& a : result.ranks) {
    a.host = r.text();
    a.port = static_cast<int>(r.u32());
  }
  return result;
}

}  // namespace

Rendezvous rendezvous(const LaunchEnv& env, const RendezvousOptions& options) {
  if (env.world < 1 || env.rank < 0 || env.rank >= env.world) {
    fail("rank {} is outside the world of {} ranks", env.rank, env.world);
  }
  if (env.world == 1) {
    Rendezvous single;
    single.payload = options.payload;
    single.ranks = {{env.master_addr, options.data_port}};
    return single;
  }
  return env.rank == 0 ? serve(env, options) : join(env, options);
}

}  // namespace lseq::dist
