#include "server/server.h"

#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <deque>
#include <cstdio>
#include <random>
#include <thread>

#include "common/thread_priority.h"
#include "engine/token_queue.h"
#include "server/protocols/namespace.h"
#include "server/protocols/anthropic/anthropic_renderer.h"
#include "server/protocols/anthropic/messages_parse.h"
#include "server/protocols/generation.h"
#include "server/protocols/openai/openai_renderer.h"
#include "server/protocols/responses/responses_protocol.h"
#include "server/transport/connections.h"
#include "server/transport/prepare_pool.h"
#include "server/transport/sse.h"

namespace sb {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

const char* kJson = "application/json";

std::string endpoint_label(const std::string& path) {
  for (const char* known :
       {"/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens",
        "/v1/models", "/health", "/metrics", "/v1/bank", "/v1/bank/prefixes", "/v1/bank/requests", "/v1/bank/pins",
        "/v1/bank/flush", "/bank", "/tokenize", "/detokenize"})
    if (path == known) return path;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  if (path.rfind("/v1/bank/pins/", 0) == 0) return "/v1/bank/pins/{id}";
  if (path.rfind("/bank/", 0) == 0) return "/bank/{asset}";
  return "other";
}

ApiError error_for_status(int status, size_t max_body) {
  switch (status) {
    case 404:
      return not_found("", "no such route", "not_found");
    case 405:
      return ApiError{405, "method not allowed", "invalid_request_error", "", "method_not_allowed"};
    case 413:
      return too_large("", "the request body is larger than " + std::to_string(max_body) + " bytes", "body_too_large");
    case 414:
      return ApiError{414, "the request URI is too long", "invalid_request_error", "", "uri_too_long"};
    default:
      if (status >= 500) return ApiError{status, "server error", "server_error", "", "server_error"};
      return ApiError{status, "bad request", "invalid_request_error", "", "bad_request"};
  }
}

// The end of a job, as the route reports it.
void log_internal(const std::string& request_id, const std::string& what) {
  std::fprintf(stderr, "statebank serve: request %s: internal error: %s\n", request_id.c_str(), what.c_str());
}

}  // namespace

bool host_is_loopback(const std::string& host) {
  if (host.empty()) return false;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return false;
  bool all = true;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      all = all && (ntohl(in->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      const in6_addr& in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr;
      all = all && (IN6_IS_ADDR_LOOPBACK(&in6) || (IN6_IS_ADDR_V4MAPPED(&in6) && in6.s6_addr[12] == 127));
    } else {
      all = false;
    }
  }
  freeaddrinfo(found);
  return all;
}

Server::Server(Backend* backend, BankAdmin* bank, ServerOptions options)
    : backend_(backend), bank_(bank), options_(std::move(options)) {
  options_.limits.vocab_size = backend_->vocab_size();
  options_.limits.has_mtp = backend_->has_mtp();
  // The prompt never exceeds the model's context length.
  const int64_t context = backend_->context_length();
  if (context > 0 && (options_.limits.max_prompt_tokens <= 0 || options_.limits.max_prompt_tokens > context))
    options_.limits.max_prompt_tokens = context;
  // No body longer than the longest prompt text that can fit, plus room for
  // every other (bounded) field, can be served: refusing it before it is
  // read bounds what a hostile request makes the server hold (a 10 MB text
  // prompt against a 32k context: 413 unread, instead of 40 MB of copies).
  if (const size_t prompt_bytes = prompt_bytes_limit(options_.limits); prompt_bytes > 0)
    options_.max_body_bytes = std::min(options_.max_body_bytes, prompt_bytes + kBodyBeyondPrompt);
  started_at_ =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  // As many preparing threads as cores: more would only queue for them.
  prepare_ = std::make_unique<PreparePool>(
      background_nice() > 0 ? std::max<size_t>(2, std::thread::hardware_concurrency()) : 0);
  // Every running and queued completion holds a request thread; the spares
  // answer 429s, the other routes and bodies on their way. Idle and
  // half-sent connections hold none (server/transport/connections.h).
  ConnectionOptions co;
  co.threads = backend_->admission().capacity() + static_cast<size_t>(std::max(1, options_.spare_threads));
  co.max_open = std::max<size_t>(1, options_.max_connections);
  co.header_timeout = options_.header_timeout;
  co.body_timeout = options_.body_timeout;
  co.io_timeout = options_.io_timeout;
  co.write_timeout = options_.write_timeout;
  co.slow_reader_threads = options_.slow_reader_threads;
  co.slow_reader_threads_per_peer = options_.slow_reader_threads_per_peer;
  co.response_buffer_bytes = options_.response_buffer_bytes;
  co.response_buffer_total_bytes = options_.response_buffer_total_bytes;
  http_ = std::make_unique<HttpServer>(
      co,
      [](std::string_view method, std::string_view path) {
        return method == "GET" && (path == "/health" || path == "/metrics");
      },
      // metrics_ outlives http_ (declared before it).
      [this](int status) { metrics_.record_request("connection", status); },
      [this](std::string_view method, std::string_view path, std::string* head, std::string_view* body) {
        return fixed_response(method, path, head, body);
      });
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_keep_alive_timeout(2);
  http_->set_tcp_nodelay(true);  // a streamed token should not wait for an ACK
  http_->set_read_timeout(options_.io_timeout);
  http_->set_write_timeout(options_.io_timeout);
  install_routes();
}

Server::~Server() {
  // A call's on_done uses this server; the queue counts it until on_done
  // has returned.
  backend_->admission().wait_idle();
}

bool Server::draining() const { return backend_->admission().closed(); }

std::string Server::next_request_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[48];
  std::snprintf(buf, sizeof buf, "%06llx%08llx", static_cast<unsigned long long>(++request_counter_ & 0xffffff),
                static_cast<unsigned long long>(rng() & 0xffffffffULL));
  return buf;
}

bool Server::fixed_response(std::string_view method, std::string_view path, std::string* head,
                            std::string_view* body) {
  if (path == "/health") {
    static constexpr std::string_view kOk = R"({"status":"ok"})", kDraining = R"({"status":"draining"})";
    const bool draining = this->draining();
    *head = std::string(draining ? "HTTP/1.1 503 Service Unavailable" : "HTTP/1.1 200 OK") +
            "\r\nContent-Type: application/json";
    *body = draining ? kDraining : kOk;
  } else if (!fixed_page_response(path, head, body)) {
    return false;
  }
  metrics_.record_request(endpoint_label(std::string(path)), draining() && path == "/health" ? 503 : 200);
  return true;
}

void Server::respond_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(openai_error_body(e), kJson);
}

void Server::respond_error(httplib::Response& res, const ApiError& e, const Protocol& protocol) {
  res.status = e.status;
  res.set_content(protocol.error_body(e), kJson);
}

const Tenant* Server::check_auth(const httplib::Request& req) const {
  if (options_.keys.empty()) return nullptr;
  std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  std::string key;
  if (header.size() > prefix.size() && header.compare(0, prefix.size(), prefix) == 0)
    key = header.substr(prefix.size());
  else if (header.empty())
    key = req.get_header_value("x-api-key");  // Anthropic's clients send this
  if (key.empty())
    throw ApiException{unauthorized("missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'")};
  const Tenant* tenant = options_.keys.find(key);
  if (tenant == nullptr) throw ApiException{unauthorized("invalid API key")};
  return tenant;
}

const Tenant* Server::check_admin(const httplib::Request& req) const {
  const Tenant* tenant = check_auth(req);
  if (tenant != nullptr && !tenant->admin)
    throw ApiException{forbidden("this route shows every tenant's bank traffic: it needs an admin key")};
  return tenant;
}

namespace {

bool is_chunked(const httplib::Request& req) {
  std::string te = req.get_header_value("Transfer-Encoding");
  for (char& ch : te) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return te.find("chunked") != std::string::npos;
}

// The routes whose bodies are read (each with read_body, after its key).
bool reads_body(const httplib::Request& req) {
  if (req.method == "POST")
    return req.path == "/v1/completions" || req.path == "/v1/chat/completions" || req.path == "/v1/responses" ||
           req.path == "/v1/messages" || req.path == "/v1/messages/count_tokens" || req.path == "/v1/bank/pins" ||
           req.path == "/v1/bank/flush" || req.path == "/tokenize" || req.path == "/detokenize";
  return req.method == "DELETE" && req.path.rfind("/v1/bank/pins/", 0) == 0;
}

}  // namespace

std::string Server::read_body(const httplib::Request& req, const httplib::ContentReader& reader) {
  const size_t most = options_.max_body_bytes;
  const auto too_large_error = [most] {
    return too_large("", "the request body is larger than " + std::to_string(most) + " bytes", "body_too_large");
  };
  // Whatever is left unread makes the connection unusable: it is closed
  // after the answer.
  const std::string encoding = req.get_header_value("Content-Encoding");
  if (!encoding.empty() && encoding != "identity" && encoding != "gzip" && encoding != "deflate") {
    Connections::close_after_response();
    throw ApiException{ApiError{415, "Content-Encoding '" + encoding.substr(0, 64) + "' is not supported",
                                "invalid_request_error", "", "unsupported_encoding"}};
  }
  const bool chunked = is_chunked(req);
  if (!chunked && !req.has_header("Content-Length")) return "";  // HTTP/1.1: no body
  if (!chunked) {
    const std::string length = req.get_header_value("Content-Length");
    char* end = nullptr;
    const unsigned long long n = std::strtoull(length.c_str(), &end, 10);
    if (length.empty() || *end != '\0' || length[0] == '-') {
      Connections::close_after_response();
      throw ApiException{bad_request("", "Content-Length is not a number", "bad_request")};
    }
    if (n > most) {
      Connections::close_after_response();
      throw ApiException{too_large_error()};
    }
    if (n == 0) return "";
  }
  // Chunked and compressed bodies are counted as they arrive (decoded).
  std::string body;
  bool over = false;
  const bool read = reader([&](const char* data, size_t n) {
    if (n > most - body.size()) {
      over = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (over) {
    Connections::close_after_response();
    throw ApiException{too_large_error()};
  }
  if (!read) {
    Connections::close_after_response();
    throw ApiException{
        bad_request("", "the request body could not be read (incomplete, malformed or not decodable)", "bad_body")};
  }
  return body;
}

Server::Route Server::guarded(Route fn, bool admin) {
  return [this, fn = std::move(fn), admin](const httplib::Request& req, httplib::Response& res) {
    std::string request_id = next_request_id();
    res.set_header("X-Request-Id", request_id);
    try {
      if (admin)
        check_admin(req);
      else
        check_auth(req);
      fn(req, res);
    } catch (const ApiException& e) {
      respond_error(res, e.error);
    } catch (const std::exception& e) {
      log_internal(request_id, e.what());
      respond_error(res, internal_error(request_id));
    }
  };
}

Server::BodyRoute Server::guarded_body(BodyRouteFn fn, bool admin) {
  return [this, fn = std::move(fn), admin](const httplib::Request& req, httplib::Response& res,
                                           const httplib::ContentReader& reader) {
    std::string request_id = next_request_id();
    res.set_header("X-Request-Id", request_id);
    bool body_read = false;
    try {
      // The key before the body: a client without one sends nothing we keep.
      if (admin)
        check_admin(req);
      else
        check_auth(req);
      const std::string body = read_body(req, reader);
      body_read = true;
      fn(req, body, res);
    } catch (const ApiException& e) {
      if (!body_read) Connections::close_after_response();
      respond_error(res, e.error);
    } catch (const std::exception& e) {
      if (!body_read) Connections::close_after_response();
      log_internal(request_id, e.what());
      respond_error(res, internal_error(request_id));
    }
  };
}

void Server::install_routes() {
  install_gates();
  install_info_routes();
  install_bank_routes();
  install_completion_routes();
  install_token_routes();
  install_error_handlers();
}

void Server::install_gates() {
  // cpp-httplib reads the body of any other POST, PUT, PATCH or DELETE
  // before its handler, without a limit when it is chunked: such a request
  // is answered here, before that, and its connection closed.
  http_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response& res) {
    const bool has_body =
        is_chunked(req) || (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
    const bool body_ignored = req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS";
    // A body nobody reads must not be taken for the next request.
    if (has_body && body_ignored) Connections::close_after_response();
    if (!has_body || body_ignored || reads_body(req)) return httplib::Server::HandlerResponse::Unhandled;
    Connections::close_after_response();
    res.status = 404;
    res.set_content(dump_json(not_found("", "no such route", "not_found").to_json()), kJson);
    return httplib::Server::HandlerResponse::Handled;
  });
  // A client that waits for "100 Continue" hears about its key and its
  // Content-Length before it sends the body.
  http_->set_expect_100_continue_handler([this](const httplib::Request& req, httplib::Response& res) {
    try {
      if (req.path != "/health" && req.path.rfind("/bank", 0) != 0) check_auth(req);
      const std::string length = req.get_header_value("Content-Length");
      if (!length.empty() && std::strtoull(length.c_str(), nullptr, 10) > options_.max_body_bytes)
        throw ApiException{
            too_large("", "the request body is larger than " + std::to_string(options_.max_body_bytes) + " bytes",
                      "body_too_large")};
      return 100;
    } catch (const ApiException& e) {
      Connections::close_after_response();
      respond_error(res, e.error);
      return e.error.status;
    }
  });
}

void Server::install_info_routes() {
  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining()) {
      res.status = 503;
      res.set_content(R"({"status":"draining"})", kJson);
    } else {
      res.set_content(R"({"status":"ok"})", kJson);
    }
  });
  http_->Get("/v1/models", guarded([this](const httplib::Request&, httplib::Response& res) {
               // Each name once: an alias may repeat the model's own name or another alias.
               std::vector<std::string> names = {backend_->model_id()};
               for (const auto& alias : options_.served_model_names)
                 if (std::find(names.begin(), names.end(), alias) == names.end()) names.push_back(alias);
               ResponseJson data = ResponseJson::array();
               for (const auto& name : names) data.push_back(model_json(name));
               res.set_content(dump_json(ResponseJson{{"object", "list"}, {"data", data}}), kJson);
             }));
  http_->Get(R"(/v1/models/(.+))", guarded([this](const httplib::Request& req, httplib::Response& res) {
               const std::string id = req.matches[1];
               const auto& aliases = options_.served_model_names;
               if (id != backend_->model_id() && std::find(aliases.begin(), aliases.end(), id) == aliases.end())
                 throw ApiException{
                     not_found("model", "the model '" + id.substr(0, 256) + "' does not exist", "model_not_found")};
               res.set_content(dump_json(model_json(id)), kJson);
             }));
  http_->Get("/metrics", guarded(
                             [this](const httplib::Request&, httplib::Response& res) {
                               const Admission& admission = backend_->admission();
                               const Connections::CutCounts cuts = http_->connections().cuts();
                               const PinBudget::Refused pins = pin_budget_.refused();
                               const ServingCounts counts{cuts.deadline, cuts.share, cuts.buffer, pins.pins,
                                                          pins.bytes};
                               res.set_content(metrics_.render(bank_->bank_stats(), admission.queued(),
                                                               admission.running(), counts),
                                               "text/plain; version=0.0.4; charset=utf-8");
                             },
                             /*admin=*/true));
}

void Server::install_completion_routes() {
  const std::pair<const char*, const Protocol*> routes[] = {{"/v1/completions", &openai_protocol(false)},
                                                            {"/v1/chat/completions", &openai_protocol(true)},
                                                            {"/v1/responses", &responses_protocol()},
                                                            {"/v1/messages", &messages_protocol()}};
  for (const auto& [path, protocol] : routes) {
    http_->Post(path, [this, protocol = protocol](const httplib::Request& req, httplib::Response& res,
                                                  const httplib::ContentReader& reader) {
      handle_completion(req, reader, res, *protocol);
    });
  }
  http_->Post("/v1/messages/count_tokens",
              [this](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
                handle_count_tokens(req, reader, res);
              });
}

void Server::install_error_handlers() {
  size_t max_body = options_.max_body_bytes;
  httplib::Server::HandlerWithResponse on_error = [max_body](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    res.set_content(dump_json(error_for_status(res.status, max_body).to_json()), kJson);
    return httplib::Server::HandlerResponse::Handled;
  };
  http_->set_error_handler(on_error);
  http_->set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    std::string id = res.get_header_value("X-Request-Id");
    log_internal(id.empty() ? "-" : id, what);
    res.status = 500;
    res.set_content(dump_json(internal_error(id.empty() ? "-" : id).to_json()), kJson);
  });
  // Counted before the status line goes out (httplib's logger runs only after
  // the body), so a client that has its answer finds it in /metrics.
  http_->set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    metrics_.record_request(endpoint_label(req.path), res.status);
  });
}

// One completion in flight: what was submitted, the queue its tokens come
// through, the response builder (the request's thread's alone), and its
// outcome.
struct Server::Call {
  CompletionRequest request;  // as submitted (the audit reruns it)
  const Protocol* protocol = nullptr;
  TokenQueue tokens;  // from the step thread; closed once the outcome is set
  std::shared_ptr<Generation> generation;
  std::vector<std::string> opening;  // a stream's first events
  bool stream = false;
  std::string request_id;
  std::string tenant;                  // what the tenant share limits (empty: none)
  std::atomic<bool> cancelled{false};  // the client is gone
  Clock::time_point arrived;
  Clock::time_point deadline = Clock::time_point::max();
  std::atomic<int64_t> first_token_us{-1};  // from arrival: the queue is part of it

  bool past_deadline() const { return Clock::now() >= deadline; }
  // Gone, late, or stopped by a stop string or the tool-call limit.
  bool should_stop() const { return cancelled.load() || past_deadline() || tokens.stopped(); }

  // Guarded by mu: the outcome, set once by end_call().
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Status status;
  CompletionResult result;
};

void Server::handle_completion(const httplib::Request& req, const httplib::ContentReader& reader,
                               httplib::Response& res, const Protocol& protocol) {
  const auto arrived = Clock::now();
  const std::string request_id = next_request_id();
  res.set_header("X-Request-Id", request_id);
  {
    std::lock_guard<std::mutex> lock(active_mu_);
    ++active_;
  }
  bool streaming = false;
  bool body_read = false;
  try {
    // The key before the body: a client without one sends nothing we keep.
    CompletionInput in = completion_input(req, request_id);
    if (draining()) throw ApiException{overloaded(503, "the server is shutting down")};
    const std::string body = read_body(req, reader);
    body_read = true;
    in.body = body;
    PreparedCompletion prepared;
    if (!prepare_->run([&] { prepared = protocol.prepare(*backend_, options_.limits, in); }))
      throw ApiException{overloaded(503, "the server is shutting down")};
    std::vector<PinSpec> pins;
    if (options_.cache_control_pins) pins = std::move(prepared.pins);
    std::shared_ptr<Call> call = start_call(std::move(prepared), protocol, arrived, request_id);
    // The share applies between two or more tenants.
    if (in.tenant != nullptr && options_.keys.tenant_count() >= 2) call->tenant = in.tenant->name;
    submit(call, protocol);
    // Only an admitted request pins (issue 47: refused ones pinned too). A
    // pin may name blocks not stored yet: they are kept once this request
    // stores them.
    const int64_t now_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
            .count();
    for (const PinSpec& spec : pins) {
      const auto pin = [&](std::string* id, int64_t* expires_ms) {
        nlohmann::json made;
        // No bank, or a prefix under one block: nothing to keep.
        if (!bank_->bank_pin(spec, &made)) return false;
        *id = made["id"].get<std::string>();
        *expires_ms = made["expires_ms"].get<int64_t>();
        return true;
      };
      const auto bytes_of = [&](const std::string& id) { return bank_->bank_pinned_bytes(id); };
      // Beyond the tenant's budget the request runs unpinned.
      (void)pin_budget_.try_pin(in.tenant ? in.tenant->name : std::string(), now_ms, pin, bytes_of);
    }
    if (call->stream) {
      streaming = true;
      stream_response(call, res);  // the stream's end releases the response
      return;
    }
    respond_when_done(*call, req, res);
  } catch (const ApiException& e) {
    if (!body_read) Connections::close_after_response();
    if (e.error.status == 429) res.set_header("Retry-After", "1");
    respond_error(res, e.error, protocol);
  } catch (const std::exception& e) {
    if (!body_read) Connections::close_after_response();
    log_internal(request_id, e.what());
    respond_error(res, internal_error(request_id), protocol);
  }
  if (!streaming) release_active();
}

CompletionInput Server::completion_input(const httplib::Request& req, const std::string& request_id) const {
  CompletionInput in;
  in.tenant = check_auth(req);
  in.cache_mode_header = req.get_header_value("X-Cache-Mode");
  in.shared_tenant = options_.shared_tenant;
  in.request_id = request_id;
  in.model_aliases = options_.served_model_names;
  in.max_tokens_cap = options_.max_tokens_cap;
  return in;
}

ResponseJson Server::model_json(const std::string& id) const {
  return ResponseJson{{"id", id},
                      {"object", "model"},
                      {"created", started_at_},
                      {"owned_by", "statebank"},
                      // Anthropic's model object, for its clients
                      {"type", "model"},
                      {"display_name", id},
                      // The prompt limit in tokens, under the names other servers use (vLLM, llama.cpp ...).
                      {"context_length", options_.limits.max_prompt_tokens},
                      {"max_model_len", options_.limits.max_prompt_tokens}};
}

void Server::handle_count_tokens(const httplib::Request& req, const httplib::ContentReader& reader,
                                 httplib::Response& res) {
  const std::string request_id = next_request_id();
  res.set_header("X-Request-Id", request_id);
  bool body_read = false;
  try {
    CompletionInput in = completion_input(req, request_id);
    const std::string body = read_body(req, reader);
    body_read = true;
    in.body = body;
    PreparedCompletion prepared;
    const bool ran = prepare_->run([&] {
      MessagesParams params =
          parse_messages_params(parse_body(body, options_.limits), options_.limits, /*count_only=*/true);
      params.chat.max_tokens = 1;
      prepared = prepare_chat_completion(*backend_, options_.limits, in, std::move(params.chat));
    });
    if (!ran) throw ApiException{overloaded(503, "the server is shutting down")};
    res.set_content(dump_json(ResponseJson{{"input_tokens", static_cast<int64_t>(prepared.request.prompt.size())}}),
                    kJson);
  } catch (const ApiException& e) {
    if (!body_read) Connections::close_after_response();
    respond_error(res, e.error, messages_protocol());
  } catch (const std::exception& e) {
    if (!body_read) Connections::close_after_response();
    log_internal(request_id, e.what());
    respond_error(res, internal_error(request_id), messages_protocol());
  }
}

std::shared_ptr<Server::Call> Server::start_call(PreparedCompletion prepared, const Protocol& protocol,
                                                 Clock::time_point arrived, const std::string& request_id) {
  auto call = std::make_shared<Call>();
  call->stream = prepared.setup.stream;
  call->request_id = request_id;
  call->arrived = arrived;
  if (options_.request_timeout.count() > 0) call->deadline = arrived + options_.request_timeout;
  call->protocol = &protocol;
  call->generation = std::make_shared<Generation>(*backend_, std::move(prepared.setup), std::move(prepared.chat_output),
                                                  std::move(prepared.renderer));
  call->request = std::move(prepared.request);
  // The engine's ticket holds the call (through on_done) for as long as it
  // may call these. The step thread only queues the token: the text, stop
  // strings and events are made on the request's thread (take_tokens).
  Call* c = call.get();
  call->request.cancelled = [c] { return c->should_stop(); };
  call->request.on_token = [c](const GeneratedToken& t) {
    if (c->first_token_us.load() < 0)
      c->first_token_us.store(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - c->arrived).count());
    return c->tokens.push(t) && !c->cancelled;
  };
  if (call->stream) call->generation->start_stream(&call->opening);
  return call;
}

void Server::submit(const std::shared_ptr<Call>& call, const Protocol& protocol) {
  const Admit admit = backend_->submit(
      call->request,
      [this, call](Status status, CompletionResult result) { end_call(*call, std::move(status), std::move(result)); },
      call->tenant);
  if (admit != Admit::kOk) throw ApiException{admission_error(admit)};
}

void Server::end_call(Call& call, Status status, CompletionResult result) {
  {
    std::lock_guard<std::mutex> lock(call.mu);
    call.status = std::move(status);
    call.result = std::move(result);
    call.done = true;
  }
  call.tokens.close();  // after the outcome: the request's thread reads it once the queue is closed
}

bool Server::take_tokens(Call& call, std::chrono::milliseconds wait, std::vector<std::string>* events) {
  std::deque<GeneratedToken> got;
  const bool closed = call.tokens.take(wait, &got);
  for (const GeneratedToken& t : got)
    if (!call.generation->on_token(t, events)) call.tokens.stop();  // the engine ends it at its next step
  return closed;
}

void Server::conclude(Call& call, std::vector<std::string>* events) {
  std::lock_guard<std::mutex> lock(call.mu);
  Status& status = call.status;
  CompletionResult& result = call.result;
  // A stop string or the tool-call limit ended the reply: a normal end,
  // whatever the engine did with the tokens after it (they are dropped).
  // The deadline ends it through cancelled(): a 504.
  const bool cut = status.code() == Code::kCancelled || result.finish_reason == FinishReason::kCancelled;
  if (!call.cancelled && call.generation->stopped_early()) {
    status = Status::ok();
    call.generation->trim(&result);
  } else if (cut && !call.cancelled && call.past_deadline()) {
    status = Status::exhausted("the request did not finish within its deadline of " +
                               std::to_string(options_.request_timeout.count()) + " s");
  }
  const Protocol& protocol = *call.protocol;
  if (status) {
    record_completion(call, protocol, result);
  } else if (is_internal(status)) {
    log_internal(call.request_id, status.to_string());
  }
  if (!events) return;
  if (status) {
    call.generation->finish_stream(result, events);
  } else if (status.code() != Code::kCancelled) {
    *events = protocol.error_events(status_error(status, "", call.request_id));
  }
}

void Server::record_completion(const Call& call, const Protocol& protocol, const CompletionResult& result) {
  const int64_t first = call.first_token_us.load();
  const double ttft_ms = first >= 0 ? first / 1000.0 : result.ttft_ms;
  const auto prompt = static_cast<int64_t>(call.request.prompt.size());
  const auto generated = static_cast<int64_t>(result.tokens.size());
  metrics_.record_completion(result.restore, prompt, generated, ttft_ms);
  metrics_.record_speculation(result.speculative);
  const int64_t now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  activity_.record(CompletedRequest{call.request_id, now_ms, protocol.route, call.request.name_space, prompt, generated,
                                    ttft_ms, result.restore});
}

void Server::stream_response(const std::shared_ptr<Call>& call, httplib::Response& res) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, call](size_t, httplib::DataSink& sink) {
        std::vector<std::string> out = std::move(call->opening);
        call->opening.clear();
        for (;;) {
          const bool closed = take_tokens(*call, std::chrono::milliseconds(100), &out);
          if (closed) conclude(*call, &out);
          for (const auto& e : out) {
            if (!sink.write(e.data(), e.size())) {
              call->cancelled = true;
              return false;
            }
          }
          if (closed) {
            sink.done();
            // The last event is written: only now may an audit look at it.
            if (call->status && !call->cancelled) backend_->response_finished(call->request, call->result);
            return true;
          }
          if (out.empty() && !sink.is_writable()) {
            call->cancelled = true;
            return false;
          }
          out.clear();
        }
      },
      [this, call](bool) {
        call->cancelled = true;  // a no-op when it finished; stops it when the stream broke
        release_active();
      });
}

void Server::respond_when_done(Call& call, const httplib::Request& req, httplib::Response& res) {
  std::vector<std::string> unused;  // no events: the body is made at the end
  while (!take_tokens(call, std::chrono::milliseconds(100), &unused)) {
    if (!call.cancelled && Connections::client_gone()) call.cancelled = true;
  }
  conclude(call, nullptr);
  if (call.cancelled) {
    res.status = 499;  // nobody is listening; nginx's code for it
  } else if (!call.status) {
    throw ApiException{status_error(call.status, "", call.request_id)};
  } else {
    // The restore record in headers too, for protocols whose bodies have no room for it.
    const RestoreRecord& r = call.result.restore;
    res.set_header("X-Restore-Mode", r.mode.name());
    res.set_header("X-Restore-Point", std::to_string(r.restore_point));
    res.set_header("X-Restore-Stored-Tokens", std::to_string(r.stored_tokens));
    res.set_content(dump_json(call.generation->response(call.result)), kJson);
    // The response is complete; the audit (if any) starts from here.
    backend_->response_finished(call.request, call.result);
  }
}

void Server::release_active() {
  {
    std::lock_guard<std::mutex> lock(active_mu_);
    --active_;
  }
  active_cv_.notify_all();
}

Status Server::bind(int* port) {
  if (options_.port == 0) {
    int p = http_->bind_to_any_port(options_.host);
    if (p < 0) return Status::io_error("cannot bind " + options_.host + " to a free port");
    *port = p;
  } else {
    if (!http_->bind_to_port(options_.host, options_.port))
      return Status::io_error("cannot bind " + options_.host + ":" + std::to_string(options_.port) +
                              " (in use, or not an address of this machine)");
    *port = options_.port;
  }
  // A burst of clients must reach the queue (and its 429), not wait in SYN
  // retries behind cpp-httplib's backlog of 5.
  if (!http_->widen_listen_backlog())
    std::fprintf(stderr, "statebank serve: could not widen the listen backlog of port %d\n", *port);
  return Status::ok();
}

Status Server::serve() {
  if (!http_->listen_after_bind() && !draining()) return Status::io_error("the listening socket failed");
  return Status::ok();
}

Status Server::shutdown() {
  // The process must be gone by --shutdown-deadline: a tenth of it (at most
  // a second) stays for what follows the bank's flush (joins, unmapping, exit).
  const auto reserve = std::min<std::chrono::milliseconds>(options_.shutdown_deadline / 10, std::chrono::seconds(1));
  const auto deadline = Clock::now() + options_.shutdown_deadline - reserve;
  // The one gate closes: from now on the server is draining.
  Admission& admission = backend_->admission();
  admission.close();
  // A body still arriving belongs to no accepted request: given up now,
  // and so is a request waiting to be prepared.
  http_->connections().drain();
  prepare_->shutdown();
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  const bool idle = admission.drain(left());
  {
    std::unique_lock<std::mutex> lock(active_mu_);
    active_cv_.wait_until(lock, deadline, [this] { return active_ == 0; });
  }
  http_->stop();
  http_->connections().shutdown();  // the kept-alive connections; joins the request threads
  Status flushed = bank_->close_bank(left());
  if (!idle) return Status::exhausted("requests still ran at the shutdown deadline; they were cancelled");
  return flushed;
}

}  // namespace sb
