// Server: statebank's HTTP API, every route of docs/interface.md (HTTP) and
// the operator's (server/bank_routes.cpp); its decisions are
// server/README.md's. Contract:
//  - every error is OpenAI-shaped (Anthropic-shaped on /v1/messages) with
//    the status interface.md lists; a 500 is logged with its request id;
//  - with keys, every route but /health needs one, checked before a body is
//    read; /metrics and /v1/bank need an admin key (check_admin);
//  - a completion is checked whole, then admitted by the engine's one queue
//    (Backend::check, Backend::submit): 429 when full, 503 once shutdown()
//    began; no thread waits per running request but the one answering it;
//  - a client gone or a deadline passed cancels its request at the next step;
//  - shutdown() finishes what was accepted, stops listening and flushes the
//    bank's write queue, all within the deadline.
// Thread safety: construct, bind() and serve() from one thread; shutdown()
// from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "server/backend/backend.h"
#include "server/protocols/namespace.h"
#include "server/operator/activity.h"
#include "server/backend/bank_admin.h"
#include "server/operator/metrics.h"
#include "server/pin_budget.h"
#include "server/protocols/completion_setup.h"
#include "server/protocols/renderer.h"
#include "server/protocols/request_parse.h"

namespace httplib {
class ContentReader;
struct Request;
struct Response;
}  // namespace httplib

namespace sb {

class HttpServer;   // server/transport/connections.h
class PreparePool;  // server/transport/prepare_pool.h

// Room in a body for everything beside its prompt text (messages' and
// tools' JSON count as prompt text; every other string field is bounded).
inline constexpr size_t kBodyBeyondPrompt = 1u << 20;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: any free port
  ApiKeys keys;     // empty: no keys (loopback, single user)
  // A tenant whose unsalted namespace every other tenant may restore from
  // (server/protocols/namespace.h); empty: none. REQUIRES: a tenant of `keys`.
  std::string shared_tenant;
  // At most this, and at most prompt_bytes_limit() + kBodyBeyondPrompt (the
  // server lowers it to that when it starts).
  size_t max_body_bytes = 16u << 20;
  ParseLimits limits;                               // vocab_size is taken from the backend; max_prompt_tokens
                                                    // 0 or above the context length means the context length
  int spare_threads = 16;                           // request threads beyond the engine's running + queued completions
  size_t max_connections = 1024;                    // open at once; at the cap the longest-waiting one makes room
  std::chrono::milliseconds header_timeout{10000};  // a request header, whole, from the accept or the last response
  std::chrono::milliseconds body_timeout{60000};    // a request body, whole, once its header is in
  std::chrono::seconds io_timeout{10};              // one read on a connection
  std::chrono::milliseconds write_timeout{10000};   // all a response may wait on its client (server/connections.h)
  // Request threads that may wait on slow clients, in all and per client
  // address (0: ConnectionOptions' defaults), and the response bytes kept
  // for them, per connection and in all (server/transport/connections.h).
  size_t slow_reader_threads = 0;
  size_t slow_reader_threads_per_peer = 0;
  size_t response_buffer_bytes = 256 << 10;
  size_t response_buffer_total_bytes = 64 << 20;
  std::chrono::seconds request_timeout{1800};       // a completion from arrival to its end; 0: none
  std::chrono::milliseconds shutdown_deadline{30000};
  // Other names the model answers to on every route (--served-model-name:
  // agents ask for their own model names); /v1/models lists them too.
  std::vector<std::string> served_model_names;
  // --max-tokens-cap: a request asking for more tokens gets at most this many
  // (its finish reason says length / max_tokens); 0: no cap.
  int64_t max_tokens_cap = 0;
  // Messages' cache_control pins its prefix (false: --ignore-cache-control,
  // accepted with no effect). Pinned objects count in each tier's budget
  // but keep others' prefixes out of it until they expire (at most 1 h), so
  // a server open to clients it does not trust may turn this off.
  bool cache_control_pins = true;
  // What one tenant's cache_control pins may hold (server/pin_budget.h);
  // beyond either, a request is served unpinned.
  size_t max_pins_per_tenant = 32;
  uint64_t max_pinned_bytes_per_tenant = 512u << 20;
};

// Whether every address `host` resolves to (getaddrinfo, numeric or by name)
// is a loopback address (127.0.0.0/8, ::1, or 127/8 mapped into IPv6). A
// name that does not resolve is not loopback. Decides whether `serve` may
// run without an API key; the spelling of the name never does.
bool host_is_loopback(const std::string& host);

class Server {
 public:
  using Clock = std::chrono::steady_clock;

  // `backend` and `bank` are two views of one backend (EngineBackend);
  // both outlive the server.
  Server(Backend* backend, BankAdmin* bank, ServerOptions options);
  ~Server();

  // Binds the listening socket; *port is the bound port.
  Status bind(int* port);
  // Serves until shutdown() (blocking).
  Status serve();
  Status shutdown();
  // After shutdown(): true when no request is queued or running (the model
  // workers can be joined). False only when requests outran the deadline.
  bool idle() const { return backend_->admission().held() == 0; }

 private:
  struct Call;  // one completion in flight

  void install_routes();
  // Answers a request that would have its body read without a limit, and
  // Expect: 100-continue, before any body arrives.
  void install_gates();
  void install_info_routes();  // /health, /v1/models, /metrics
  void install_completion_routes();
  void install_error_handlers();  // errors in OpenAI's shape; request metrics
  void install_bank_routes();     // server/bank_routes.cpp
  void install_token_routes();    // /tokenize, /detokenize: server/token_routes.cpp
  // The page's files as the poll thread answers them (Connections::Fixed;
  // server/bank_routes.cpp); false for any other path.
  static bool fixed_page_response(std::string_view path, std::string* head, std::string_view* body);
  // /health and the page's files, answered without a request thread.
  bool fixed_response(std::string_view method, std::string_view path, std::string* head, std::string_view* body);
  void handle_completion(const httplib::Request& req, const httplib::ContentReader& reader, httplib::Response& res,
                         const Protocol& protocol);
  // The body, read after the route's key check: at most max_body_bytes as
  // they arrive (chunked and compressed bodies included, decoded). Throws 413
  // body_too_large, 415 for an encoding other than gzip or deflate, 400 for a
  // body that cannot be read; any of these closes the connection after the answer.
  std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader);
  // The steps of handle_completion.
  // REQUIRES: `protocol` outlives the call (the Protocols are static).
  std::shared_ptr<Call> start_call(PreparedCompletion prepared, const Protocol& protocol, Clock::time_point arrived,
                                   const std::string& request_id);
  // Hands the call to the engine's queue; throws 429 / 503 (admission_error).
  void submit(const std::shared_ptr<Call>& call, const Protocol& protocol);
  // The call's end (on an engine thread): its outcome, then the token queue
  // closes, which wakes the request's thread. Nothing else runs there.
  void end_call(Call& call, Status status, CompletionResult result);
  // On the request's thread: the tokens queued so far through the call's
  // Generation (text, stop strings, a stream's events into *events); a stop
  // goes back to the engine as a cancellation. True once the queue is
  // closed and every token taken.
  bool take_tokens(Call& call, std::chrono::milliseconds wait, std::vector<std::string>* events);
  // On the request's thread once take_tokens() returned true: the outcome as
  // the client sees it, metrics, and (events not null) a stream's last events.
  void conclude(Call& call, std::vector<std::string>* events);
  void record_completion(const Call& call, const Protocol& protocol, const CompletionResult& result);
  void stream_response(const std::shared_ptr<Call>& call, httplib::Response& res);
  void respond_when_done(Call& call, const httplib::Request& req, httplib::Response& res);
  // POST /v1/messages/count_tokens: the prompt's tokens as /v1/messages would render them.
  void handle_count_tokens(const httplib::Request& req, const httplib::ContentReader& reader, httplib::Response& res);
  CompletionInput completion_input(const httplib::Request& req, const std::string& request_id) const;
  ResponseJson model_json(const std::string& id) const;

  void respond_error(httplib::Response& res, const ApiError& e);  // OpenAI's shape
  void respond_error(httplib::Response& res, const ApiError& e, const Protocol& protocol);
  // The tenant of the presented key (null without keys); throws ApiException.
  const Tenant* check_auth(const httplib::Request& req) const;
  // The one check every operator route makes: check_auth, and with keys
  // configured the tenant must be an admin. Returns the tenant; throws.
  const Tenant* check_admin(const httplib::Request& req) const;
  using Route = std::function<void(const httplib::Request&, httplib::Response&)>;
  // Wraps a route: request id, the check (check_auth, or check_admin when
  // `admin`), errors as OpenAI-shaped responses.
  Route guarded(Route fn, bool admin = false);
  // The same for a route with a body: the check, then read_body, then fn.
  using BodyRouteFn = std::function<void(const httplib::Request&, const std::string& body, httplib::Response&)>;
  using BodyRoute = std::function<void(const httplib::Request&, httplib::Response&, const httplib::ContentReader&)>;
  BodyRoute guarded_body(BodyRouteFn fn, bool admin = false);
  std::string next_request_id();
  bool draining() const;  // the queue is closed (shutdown() began)
  void release_active();  // one completion response fully written

  Backend* backend_;
  BankAdmin* bank_;
  ServerOptions options_;
  Metrics metrics_;
  PinBudget pin_budget_{options_.max_pins_per_tenant, options_.max_pinned_bytes_per_tenant};
  Activity activity_;
  // Parsing and checking before admission, below the request threads'
  // priority; declared before http_ so that it outlives the request threads.
  std::unique_ptr<PreparePool> prepare_;
  std::unique_ptr<HttpServer> http_;
  int64_t started_at_ = 0;
  std::atomic<uint64_t> request_counter_{0};
  std::mutex active_mu_;
  std::condition_variable active_cv_;
  // Completion responses not yet fully written (a stream outlives its
  // call's end in the queue): shutdown waits for them. Not a gate.
  int64_t active_ = 0;
};

}  // namespace sb
