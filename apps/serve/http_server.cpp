#include "http_server.h"

#include <fmt/format.h>
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/serve/stream_events.h"
#include "core/serve/translate_response.h"
#include "util/error.h"

namespace lseq {

namespace {

using serve::Clock;
constexpr auto kConnectionPoll = std::chrono::milliseconds(50);
const char* kEndpoints = "lsserve answers POST /translate, GET /health and GET /metrics";
const char* kDraining = "lsserve is shutting down (SIGTERM): it answers the requests it has and takes no new ones";

}  // namespace

struct HttpServer::Impl {
  Impl(HttpServerConfig c, serve::Scheduler& s, serve::ServeMetrics& m)
      : config(std::move(c)), scheduler(s), metrics(m) {}

  // While one exists, a request is in flight: drain() waits until none is.
  struct InFlight {
    explicit InFlight(Impl& i) : impl(i) {
      std::lock_guard<std::mutex> lock(impl.mutex);
      ++impl.in_flight;
    }
    ~InFlight() {
      std::lock_guard<std::mutex> lock(impl.mutex);
      if (--impl.in_flight == 0) impl.idle.notify_all();
    }
    Impl& impl;
  };

  void routes();
  void refuse(httplib::Response& res, int status, const std::string& message, const char* retry_after = nullptr);
  void translate(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader);
  bool answer(serve::PendingRequest& request, httplib::DataSink& sink);
  // A streaming request: its tokens as server-sent events while they come (serve/stream_events.h), then the answer.
  bool answer_stream(serve::PendingRequest& request, httplib::DataSink& sink);
  // The end of either: the request is taken, counted and its answer written (as an event when streaming).
  bool finish(serve::PendingRequest& request, serve::PendingRequest::Outcome outcome, httplib::DataSink& sink);
  Clock::time_point deadline_of(const serve::PendingRequest& request) const {
    return request.arrival() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(config.request_timeout_seconds));
  }
  int in_flight_now() {
    std::lock_guard<std::mutex> lock(mutex);
    return in_flight;
  }

  HttpServerConfig config;
  serve::Scheduler& scheduler;
  serve::ServeMetrics& metrics;
  httplib::Server server;
  std::atomic<bool> draining{false};
  std::atomic<bool> finished{false};  // serve() returned
  socket_t listening_socket = INVALID_SOCKET;  // the last socket httplib made to listen on (bind())
  std::mutex mutex;
  std::condition_variable idle;
  int in_flight = 0;
};

void HttpServer::Impl::refuse(httplib::Response& res, int status, const std::string& message,
                              const char* retry_after) {
  res.status = status;
  if (retry_after) res.set_header("Retry-After", retry_after);
  res.set_content(serve::render_error(message), "application/json");
  metrics.count_response(status);
}

void HttpServer::Impl::translate(const httplib::Request&, httplib::Response& res,
                                 const httplib::ContentReader& reader) {
  const Clock::time_point arrival = Clock::now();
  auto in_flight_token = std::make_shared<InFlight>(*this);
  if (draining) return refuse(res, 503, kDraining, "5");

  std::string body;
  bool too_large = false;
  const bool read = reader([&](const char* data, size_t length) {
    if (body.size() + length > config.max_request_bytes) {
      too_large = true;
      return false;
    }
    body.append(data, length);
    return true;
  });
  if (too_large || res.status == 413)
    return refuse(res, 413, fmt::format("the request body is larger than --max-request-bytes {}",
                                        config.max_request_bytes));
  if (!read) return refuse(res, 400, "could not read the request body (a broken connection, or a malformed chunked or "
                                     "compressed body)");

  serve::TranslateRequest parsed;
  if (auto error = serve::parse_translate_request(body, config.defaults, config.limits, parsed))
    return refuse(res, error->status, error->message);
  std::string().swap(body);
  auto request = std::make_shared<serve::PendingRequest>(static_cast<int>(parsed.sentences.size()), parsed.settings,
                                                         arrival, parsed.stream);
  serve::EncodedSentences encoded = serve::encode_sentences(parsed.sentences, config.encoding);
  for (int index : encoded.empty) request->set_result(index, {});
  for (auto& [index, message] : encoded.errors) request->set_error(index, std::move(message));
  const size_t to_decode = encoded.to_decode.size();
  switch (scheduler.submit(request, std::move(encoded.to_decode))) {
    case serve::Scheduler::Admission::queue_full:
      return refuse(res, 503,
                    fmt::format("the queue is full: {} sentences wait (--max-queue {}) and this request has {}; retry "
                                "later",
                                scheduler.waiting(), config.limits.max_queue, to_decode),
                    "1");
    case serve::Scheduler::Admission::closed: return refuse(res, 503, kDraining, "5");
    case serve::Scheduler::Admission::accepted: break;
  }
  metrics.count_sentences("error", static_cast<int64_t>(encoded.errors.size()));
  res.status = 200;
  res.set_chunked_content_provider(
      request->streaming() ? "text/event-stream" : "application/json",
      [this, request, in_flight_token](size_t, httplib::DataSink& sink) {
        return request->streaming() ? answer_stream(*request, sink) : answer(*request, sink);
      },
      [this, request](bool written) {
        // Not written (the provider never ran, or the client went away while it wrote): nothing may stay queued.
        if (!written) scheduler.cancel(*request);
      });
}

bool HttpServer::Impl::answer(serve::PendingRequest& request, httplib::DataSink& sink) {
  const auto outcome = request.wait(deadline_of(request), [&sink] { return sink.is_writable(); }, kConnectionPoll);
  return finish(request, outcome, sink);
}

bool HttpServer::Impl::answer_stream(serve::PendingRequest& request, httplib::DataSink& sink) {
  serve::StreamEvents events(request.size(), config.detokenize);
  uint64_t seen = 0;
  serve::PendingRequest::Outcome outcome;
  while (true) {
    outcome = request.wait_for_news(deadline_of(request), [&sink] { return sink.is_writable(); }, kConnectionPoll,
                                    seen);
    if (outcome != serve::PendingRequest::Outcome::done) break;
    const serve::PendingRequest::Progress progress = request.progress();
    const std::string out = events.events_for(progress);
    if (!out.empty() && !sink.write(out.data(), out.size())) {
      outcome = serve::PendingRequest::Outcome::disconnected;
      break;
    }
    if (progress.all_done) break;
  }
  return finish(request, outcome, sink);
}

bool HttpServer::Impl::finish(serve::PendingRequest& request, serve::PendingRequest::Outcome outcome,
                              httplib::DataSink& sink) {
  std::string error, not_done;
  if (outcome != serve::PendingRequest::Outcome::done) scheduler.cancel(request);
  const std::vector<serve::PendingRequest::Entry> entries = request.take();
  int64_t done = 0, translated = 0;
  for (const auto& entry : entries) {
    done += entry.done;
    translated += entry.done && entry.error.empty();
  }
  const int64_t missing = static_cast<int64_t>(entries.size()) - done;
  if (outcome == serve::PendingRequest::Outcome::disconnected) {
    metrics.count_sentences("cancelled", missing);
    metrics.count_response(499);  // nginx's "client closed request"
    return false;
  }
  if (outcome == serve::PendingRequest::Outcome::timed_out) {
    error = fmt::format("timed out after {} s (--request-timeout): {} of {} sentences were not translated",
                        config.request_timeout_seconds, missing, entries.size());
    not_done = "not translated before the request timed out (--request-timeout)";
    metrics.count_sentences("timed_out", missing);
  }
  metrics.count_sentences("translated", translated);
  std::string body = serve::render_translations(entries, request.settings(), config.detokenize, not_done, error);
  if (request.streaming()) body = serve::StreamEvents::closing(body);
  const bool written = sink.write(body.data(), body.size());
  sink.done();
  metrics.count_response(200);
  metrics.observe_latency(std::chrono::duration<double>(Clock::now() - request.arrival()).count());
  return written;
}

void HttpServer::Impl::routes() {
  server.Post("/translate", [this](const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader) { translate(req, res, reader); });
  server.Get("/translate", [this](const httplib::Request&, httplib::Response& res) {
    refuse(res, 405, "use POST /translate with a JSON body: {\"text\": [sentences]}");
  });
  server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining) {
      res.status = 503;
      res.set_header("Retry-After", "5");
      res.set_content("{\"status\":\"draining\"}\n", "application/json");
    } else {
      res.set_content("{\"status\":\"ok\"}\n", "application/json");
    }
  });
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    serve::ServeGauges gauges;
    gauges.queue_sentences = scheduler.waiting();
    gauges.queue_requests = scheduler.waiting_requests();
    gauges.in_flight = in_flight_now();
    gauges.draining = draining;
    if (config.decoder_gauges) config.decoder_gauges(gauges);
    res.set_content(metrics.render(gauges, Clock::now()), "text/plain; version=0.0.4; charset=utf-8");
  });
  // Answers that httplib makes itself (404, 413 before the body is read, 400 for a malformed request line) get a
  // JSON message too; answers that already have one keep it.
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty() || res.content_provider_) return httplib::Server::HandlerResponse::Unhandled;
        std::string message;
        switch (res.status) {
          case 404: message = fmt::format("no such endpoint: {} {}; {}", req.method, req.path, kEndpoints); break;
          case 413: message = "the request is too large (--max-request-bytes)"; break;
          case 414: message = "the request's URI is too long"; break;
          case 400: message = "malformed HTTP request"; break;
          default: message = fmt::format("HTTP status {}", res.status); break;
        }
        res.set_content(serve::render_error(message), "application/json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  server.set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    spdlog::error("{} {}: internal error: {}", req.method, req.path, what);
    refuse(res, 500, "internal error: " + what);
  });
}

HttpServer::HttpServer(HttpServerConfig config, serve::Scheduler& scheduler, serve::ServeMetrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(config), scheduler, metrics)) {
  Impl& s = *impl_;
  const size_t threads = static_cast<size_t>(s.config.threads);
  s.server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.server.set_keep_alive_max_count(1000);
  s.server.set_keep_alive_timeout(5);
  s.server.set_read_timeout(10);
  s.server.set_write_timeout(10);
  s.server.set_tcp_nodelay(true);
  // httplib's default also sets SO_REUSEPORT, with which a second lsserve on a port in use would start and silently
  // share its connections; SO_REUSEADDR alone still lets a restarted lsserve take the port of one just stopped.
  // The socket is noted for bind(): the last one made is the one that was bound.
  s.server.set_socket_options([&s](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    s.listening_socket = sock;
  });
  // A Content-Length above the limit is refused with 413 without reading the body into memory.
  s.server.set_payload_max_length(s.config.max_request_bytes);
  s.routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  Impl& s = *impl_;
  int port = s.config.port;
  const bool bound = port == 0 ? (port = s.server.bind_to_any_port(s.config.bind)) > 0
                               : s.server.bind_to_port(s.config.bind, port);
  if (!bound)
    fail("cannot listen on {}:{}: the port is in use or the address is not this machine's; choose others with "
         "--bind and --port",
         s.config.bind, s.config.port);
  // httplib listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed when the system's library was compiled):
  // while the accepting thread was busy, new connections beyond it had their handshakes dropped, and a client's
  // retry comes a second later (serve_test.sh: 6 of 64 connected). Listening again on the bound socket raises the
  // backlog (the kernel caps it at net.core.somaxconn).
  if (s.listening_socket == INVALID_SOCKET || ::listen(s.listening_socket, SOMAXCONN) != 0)
    spdlog::warn(
        "the listening socket's backlog stays at httplib's 5 connections: a burst of new connections may "
        "wait a second for its handshake");
  return port;
}

void HttpServer::serve() {
  Impl& s = *impl_;
  const bool clean = s.server.listen_after_bind();
  s.finished = true;
  if (!clean && !s.draining) fail("the HTTP server stopped accepting connections");
}

void HttpServer::drain() {
  Impl& s = *impl_;
  s.draining = true;
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    s.idle.wait(lock, [&] { return s.in_flight == 0; });
  }
  // httplib's stop() does nothing before its accept loop runs; serve() starts it right after bind(), and lsserve
  // arms its signals between the two.
  while (!s.finished && !s.server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  s.server.stop();
}

}  // namespace lseq
