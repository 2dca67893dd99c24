#pragma once
// lsserve's HTTP side, on cpp-httplib (the system's libcpp-httplib-dev): one thread per connection from a pool of
// --http-threads. Endpoints:
//   POST /translate  a request (core/serve/translate_request.h) is read, checked and its sentences encoded on the
//                    connection's thread, then queued (core/serve/scheduler.h); the thread waits for the results
//                    and writes the answer (core/serve/translate_response.h). Refusals answer {"error": "..."}:
//                    400 malformed, 413 too large, 503 queue full or draining (with Retry-After).
//   GET /health      200 {"status": "ok"}; 503 {"status": "draining"} after SIGTERM
//   GET /metrics     Prometheus text (core/serve/serve_metrics.h)
// An accepted request is answered 200 with a chunked body written once its sentences are done: while it waits, its
// thread checks every 50 ms whether the client is still there, and drops the request's waiting sentences from the
// queue if not (or once --request-timeout has passed: those sentences are answered with an error). A streaming
// request (a language model's "stream": true) is answered as server-sent events while its tokens come.
#include <functional>
#include <memory>
#include <string>

#include "core/search/translator.h"
#include "core/serve/scheduler.h"
#include "core/serve/serve_metrics.h"
#include "core/serve/translate_request.h"

namespace lseq {

struct HttpServerConfig {
  std::string bind = "127.0.0.1";
  int port = 8080;                      // 0: any free port
  int threads = 128;                    // --http-threads
  size_t max_request_bytes = 1 << 20;   // --max-request-bytes
  double request_timeout_seconds = 60;  // --request-timeout
  serve::RequestLimits limits;
  serve::SentenceEncoding encoding;
  TranslateSettings defaults;  // the search of requests that give no options
  Detokenizer detokenize;
  // Adds what only the decoders know (their recorded steps) to GET /metrics' gauges; called on HTTP threads.
  std::function<void(serve::ServeGauges&)> decoder_gauges;
};

class HttpServer {
 public:
  HttpServer(HttpServerConfig config, serve::Scheduler& scheduler, serve::ServeMetrics& metrics);
  ~HttpServer();

  int bind();     // opens the listening socket and returns its port; lseq::Error naming the address if it cannot
  void serve();   // answers requests until drain() has finished
  // From another thread: new requests get 503, the accepted ones are answered, then serve() returns. Idle
  // kept-alive connections close within their keep-alive time-out (5 s).
  void drain();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lseq
