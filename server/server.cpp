#include "server/server.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <random>

#include "server/connection_probe.h"
#include "server/decoding_rules.h"
#include "server/generation.h"
#include "server/namespace.h"
#include "server/sse.h"

namespace sb {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

const char* kJson = "application/json";

std::string endpoint_label(const std::string& path) {
  for (const char* known : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics", "/v1/bank",
                            "/v1/bank/prefixes", "/v1/bank/requests", "/v1/bank/pins", "/v1/bank/flush", "/bank"})
    if (path == known) return path;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  if (path.rfind("/v1/bank/pins/", 0) == 0) return "/v1/bank/pins/{id}";
  if (path.rfind("/bank/", 0) == 0) return "/bank/{asset}";
  return "other";
}

ApiError error_for_status(int status, size_t max_body) {
  switch (status) {
    case 404: return not_found("", "no such route", "not_found");
    case 405: return ApiError{405, "method not allowed", "invalid_request_error", "", "method_not_allowed"};
    case 413:
      return too_large("", "the request body is larger than " + std::to_string(max_body) + " bytes", "body_too_large");
    case 414: return ApiError{414, "the request URI is too long", "invalid_request_error", "", "uri_too_long"};
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

Server::Server(Backend* backend, ServerOptions options)
    : backend_(backend),
      options_(std::move(options)),
      http_(std::make_unique<httplib::Server>()),
      scheduler_(backend, options_.workers, options_.max_queue) {
  options_.limits.vocab_size = backend_->vocab_size();
  started_at_ = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  int threads = options_.http_threads;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_keep_alive_timeout(2);
  http_->set_tcp_nodelay(true);  // a streamed token should not wait for an ACK
  http_->set_read_timeout(30);
  install_routes();
}

Server::~Server() = default;

std::string Server::next_request_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[48];
  std::snprintf(buf, sizeof buf, "%06llx%08llx", static_cast<unsigned long long>(++request_counter_ & 0xffffff),
                static_cast<unsigned long long>(rng() & 0xffffffffULL));
  return buf;
}

void Server::respond_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump_json(e.to_json()), kJson);
}

const Tenant* Server::check_auth(const httplib::Request& req) const {
  if (options_.keys.empty()) return nullptr;
  std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (header.size() <= prefix.size() || header.compare(0, prefix.size(), prefix) != 0)
    throw ApiException{unauthorized("missing API key: send 'Authorization: Bearer KEY'")};
  const Tenant* tenant = options_.keys.find(header.substr(prefix.size()));
  if (tenant == nullptr) throw ApiException{unauthorized("invalid API key")};
  return tenant;
}

const Tenant* Server::check_admin(const httplib::Request& req) const {
  const Tenant* tenant = check_auth(req);
  if (tenant != nullptr && !tenant->admin)
    throw ApiException{forbidden("this route shows every tenant's bank traffic: it needs an admin key")};
  return tenant;
}

Server::Route Server::guarded(Route fn, bool admin) {
  return [this, fn = std::move(fn), admin](const httplib::Request& req, httplib::Response& res) {
    std::string request_id = next_request_id();
    res.set_header("X-Request-Id", request_id);
    try {
      if (admin) check_admin(req);
      else check_auth(req);
      fn(req, res);
    } catch (const ApiException& e) {
      respond_error(res, e.error);
    } catch (const std::exception& e) {
      log_internal(request_id, e.what());
      respond_error(res, internal_error(request_id));
    }
  };
}

void Server::install_routes() {
  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining_) {
      res.status = 503;
      res.set_content(R"({"status":"draining"})", kJson);
    } else {
      res.set_content(R"({"status":"ok"})", kJson);
    }
  });
  http_->Get("/v1/models", guarded([this](const httplib::Request&, httplib::Response& res) {
    json model = {{"id", backend_->model_id()}, {"object", "model"}, {"created", started_at_}, {"owned_by", "statebank"}};
    res.set_content(dump_json(json{{"object", "list"}, {"data", json::array({model})}}), kJson);
  }));
  http_->Get(R"(/v1/models/(.+))", guarded([this](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] != backend_->model_id())
      throw ApiException{not_found("model", "the model '" + std::string(req.matches[1]) + "' does not exist", "model_not_found")};
    json model = {{"id", backend_->model_id()}, {"object", "model"}, {"created", started_at_}, {"owned_by", "statebank"}};
    res.set_content(dump_json(model), kJson);
  }));
  http_->Get("/metrics", guarded([this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_.render(backend_->bank_stats(), scheduler_.queued(), scheduler_.running()),
                    "text/plain; version=0.0.4; charset=utf-8");
  }, /*admin=*/true));
  install_bank_routes();
  http_->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, false);
  });
  http_->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, true);
  });

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
  http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.record_request(endpoint_label(req.path), res.status);
  });
}

void Server::handle_completion(const httplib::Request& req, httplib::Response& res, bool chat) {
  const auto arrived = Clock::now();
  std::string request_id = next_request_id();
  res.set_header("X-Request-Id", request_id);
  {
    std::lock_guard<std::mutex> lock(active_mu_);
    ++active_;
  }
  // Ends this response's share of active_ (at once, or when the stream ends).
  auto release = [this] {
    {
      std::lock_guard<std::mutex> lock(active_mu_);
      --active_;
    }
    active_cv_.notify_all();
  };
  bool streaming = false;
  try {
    const Tenant* tenant = check_auth(req);
    if (draining_) throw ApiException{overloaded(503, "the server is shutting down")};
    nlohmann::ordered_json body = parse_body(req.body, options_.limits);
    CacheMode cache_mode = parse_cache_mode(req.get_header_value("X-Cache-Mode"));

    auto job = std::make_shared<Job>();
    CompletionRequest& creq = job->request;
    GenerationSetup setup;
    setup.chat = chat;
    setup.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    setup.model = backend_->model_id();
    setup.stop_token_ids = backend_->stop_token_ids();
    std::unique_ptr<ChatOutput> chat_output;
    const CommonParams* common = nullptr;
    ChatParams chat_params;
    CompletionParams completion_params;
    const char* prompt_param = "prompt";
    std::shared_ptr<const constrain::Grammar> grammar;
    if (chat) {
      chat_params = parse_chat_params(body, options_.limits);
      common = &chat_params;
      prompt_param = "messages";
      const bool calls_forced = chat_params.tool_choice == "required" || chat_params.tool_choice_named;
      // A constrained reply is the answer itself: unless the request asks
      // for thinking, the template is told to leave it out.
      if ((calls_forced || chat_params.response_grammar) && !chat_params.enable_thinking) chat_params.enable_thinking = false;
      ChatPrompt rendered;
      Status s = backend_->render_chat(chat_params, &rendered);
      if (!s) throw ApiException{bad_request("messages", "cannot render the conversation: " + s.message())};
      grammar = chat_params.response_grammar;
      if (calls_forced) {
        nlohmann::ordered_json callable = nlohmann::ordered_json::array();
        for (const auto& t : chat_params.tools)
          if (!chat_params.tool_choice_named || t["function"]["name"] == chat_params.tool_choice) callable.push_back(t);
        std::shared_ptr<constrain::Grammar> calls;
        s = constrain::Grammar::tool_calls(callable,
                                           rendered.flavour == ChatFlavour::kQwen35Xml ? constrain::Grammar::CallSyntax::kXml
                                                                                      : constrain::Grammar::CallSyntax::kJson,
                                           chat_params.parallel_tool_calls, &calls);
        if (!s) throw ApiException{bad_request(s.message().substr(0, s.message().find(':')), s.message(), "unsupported_schema")};
        grammar = calls;
      }
      if (grammar && rendered.opens_thinking) grammar = constrain::Grammar::after_reasoning(grammar);
      if (!chat_params.parallel_tool_calls) setup.max_tool_calls = 1;
      creq.prompt = std::move(rendered.ids);
      creq.message_boundary = rendered.message_boundary;
      setup.logprobs = chat_params.logprobs ? chat_params.top_logprobs : -1;
      creq.top_logprobs = chat_params.top_logprobs;
      chat_output = backend_->new_chat_output(chat_params, rendered);
      setup.id = "chatcmpl-" + request_id;
    } else {
      completion_params = parse_completion_params(body, options_.limits);
      common = &completion_params;
      if (completion_params.prompt_is_text) {
        Status s = backend_->encode(completion_params.prompt_text, &creq.prompt);
        if (!s) throw ApiException{bad_request("prompt", "cannot tokenize the prompt: " + s.message())};
        if (creq.prompt.empty()) throw ApiException{bad_request("prompt", "the prompt has no tokens")};
        setup.echo_text = completion_params.prompt_text;
      } else {
        creq.prompt = completion_params.prompt_ids;
        if (completion_params.echo) {
          auto ts = backend_->new_text_stream();
          for (int32_t id : creq.prompt) setup.echo_text += ts->push(id);
          setup.echo_text += ts->finish();
        }
      }
      setup.logprobs = completion_params.logprobs;
      setup.echo = completion_params.echo;
      creq.top_logprobs = std::max(0, completion_params.logprobs);
      creq.echo = completion_params.echo && completion_params.logprobs >= 0;
      setup.id = "cmpl-" + request_id;
      grammar = completion_params.response_grammar;
    }
    if (!common->model.empty() && common->model != backend_->model_id())
      throw ApiException{not_found("model", "the model '" + common->model + "' does not exist; this server serves '" +
                                                backend_->model_id() + "'",
                                   "model_not_found")};
    int64_t n_prompt = static_cast<int64_t>(creq.prompt.size());
    if (options_.limits.max_prompt_tokens > 0 && n_prompt > options_.limits.max_prompt_tokens)
      throw ApiException{too_large(prompt_param,
                                   "the prompt has " + std::to_string(n_prompt) + " tokens, more than the limit of " +
                                       std::to_string(options_.limits.max_prompt_tokens),
                                   "context_length_exceeded")};
    creq.max_tokens = common->max_tokens;
    creq.sampling = common->sampling;
    if (!common->seed_given) {
      // A fresh seed per request, reported in the response so it can be
      // replayed; 53 bits, so that JavaScript clients read it back exactly.
      static thread_local std::mt19937_64 seeds(std::random_device{}());
      creq.sampling.seed = seeds() >> 11;
    }
    setup.seed = creq.sampling.seed;
    {
      DecodingRules rules;
      rules.presence_penalty = common->presence_penalty;
      rules.frequency_penalty = common->frequency_penalty;
      rules.repetition_penalty = common->repetition_penalty;
      rules.logit_bias = common->logit_bias;
      rules.grammar = grammar;
      rules.vocabulary = backend_->vocabulary();
      if (grammar && !rules.vocabulary)
        throw ApiException{bad_request(chat ? "tool_choice" : "response_format",
                                       "this server's model cannot constrain its output")};
      if (rules.repetition_penalty != 1.0f) rules.prompt = creq.prompt;
      if (!rules.empty()) {
        auto shared = std::make_shared<const DecodingRules>(std::move(rules));
        creq.make_processor = [shared] { return shared->make(); };
      }
    }
    creq.stop_tokens = setup.stop_token_ids;
    creq.cache_mode = cache_mode;
    creq.name_space = request_namespace(tenant, common->has_cache_salt, common->cache_salt);
    if (!options_.shared_tenant.empty() && tenant != nullptr && tenant->name != options_.shared_tenant) {
      const Tenant shared{options_.shared_tenant, false};
      creq.shared_name_space = request_namespace(&shared, false, "");
    }
    setup.stream = common->stream;
    setup.include_usage = common->include_usage;
    setup.stop = common->stop;
    setup.prompt_ids = creq.prompt;

    auto gen = std::make_shared<Generation>(*backend_, std::move(setup), std::move(chat_output));
    auto first_token_at = std::make_shared<std::atomic<int64_t>>(-1);
    Job* raw = job.get();  // the job outlives every call of these callbacks
    creq.on_token = [raw, gen, first_token_at, arrived, streaming = common->stream](const GeneratedToken& t) {
      if (first_token_at->load() < 0)
        first_token_at->store(std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - arrived).count());
      if (raw->cancelled) return false;
      std::vector<std::string> events;
      bool more = gen->on_token(t, &events);
      if (streaming && !events.empty()) {
        {
          std::lock_guard<std::mutex> lock(raw->mu);
          for (auto& e : events) raw->events.push_back(std::move(e));
        }
        raw->cv.notify_all();
      }
      return more && !raw->cancelled;
    };
    job->on_done = [this, gen, first_token_at, request_id, chat, streaming = common->stream](Job& j) {
      // A stop string ends generation through on_token; that is a normal end.
      if (j.status.code() == Code::kCancelled && gen->stopped_early() && !j.cancelled) j.status = Status::ok();
      if (j.status) {
        double ttft_ms = first_token_at->load() >= 0 ? first_token_at->load() / 1000.0 : j.result.ttft_ms;
        metrics_.record_completion(j.result.restore, static_cast<int64_t>(j.request.prompt.size()),
                                   static_cast<int64_t>(j.result.tokens.size()), ttft_ms);
        activity_.record(CompletedRequest{
            request_id,
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count(),
            chat ? "/v1/chat/completions" : "/v1/completions", j.request.name_space,
            static_cast<int64_t>(j.request.prompt.size()), static_cast<int64_t>(j.result.tokens.size()), ttft_ms,
            j.result.restore});
      } else if (j.status.code() != Code::kCancelled) {
        log_internal(request_id, j.status.to_string());
      }
      if (!streaming) return;
      std::vector<std::string> events;
      if (j.status) {
        gen->finish_stream(j.result, &events);
      } else if (j.status.code() != Code::kCancelled) {
        events.push_back(sse_event(internal_error(request_id).to_json()));
        events.push_back(sse_done());
      }
      for (auto& e : events) j.events.push_back(std::move(e));
    };

    if (common->stream) {
      std::vector<std::string> opening;
      gen->start_stream(&opening);
      for (auto& e : opening) job->events.push_back(std::move(e));
    }
    switch (scheduler_.submit(job)) {
      case Scheduler::Submit::kOk: break;
      case Scheduler::Submit::kFull:
        throw ApiException{overloaded(429, "too many requests are waiting; retry later")};
      case Scheduler::Submit::kClosed: throw ApiException{overloaded(503, "the server is shutting down")};
    }

    if (common->stream) {
      streaming = true;
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [this, job](size_t, httplib::DataSink& sink) {
            for (;;) {
              std::deque<std::string> batch;
              bool done;
              {
                std::unique_lock<std::mutex> lock(job->mu);
                job->cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return !job->events.empty() || job->done; });
                batch.swap(job->events);
                done = job->done;
              }
              for (const auto& e : batch) {
                if (!sink.write(e.data(), e.size())) {
                  job->cancelled = true;
                  return false;
                }
              }
              if (done) {
                sink.done();
                // The last event is written: only now may an audit look at it.
                if (job->status && !job->cancelled) backend_->response_finished(job->request, job->result);
                return true;
              }
              if (batch.empty() && !sink.is_writable()) {
                job->cancelled = true;
                return false;
              }
            }
          },
          [job, release](bool) {
            job->cancelled = true;  // a no-op when it finished; stops it when the stream broke
            release();
          });
      return;
    }

    ConnectionProbe probe(req.remote_addr, req.remote_port, req.local_port);
    std::unique_lock<std::mutex> lock(job->mu);
    while (!job->done) {
      job->cv.wait_for(lock, std::chrono::milliseconds(100));
      if (!job->done && !job->cancelled && !probe.alive()) job->cancelled = true;
    }
    if (job->cancelled) {
      res.status = 499;  // nobody is listening; nginx's code for it
    } else if (!job->status) {
      throw ApiException{internal_error(request_id)};
    } else {
      res.set_content(dump_json(gen->response(job->result)), kJson);
      // The response is complete; the audit (if any) starts from here.
      backend_->response_finished(job->request, job->result);
    }
  } catch (const ApiException& e) {
    respond_error(res, e.error);
  } catch (const std::exception& e) {
    log_internal(request_id, e.what());
    respond_error(res, internal_error(request_id));
  }
  if (!streaming) release();
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
  return Status::ok();
}

Status Server::serve() {
  if (!http_->listen_after_bind() && !draining_) return Status::io_error("the listening socket failed");
  return Status::ok();
}

Status Server::shutdown() {
  const auto deadline = Clock::now() + options_.shutdown_deadline;
  draining_ = true;
  scheduler_.close();
  auto left = [&] {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  bool idle = scheduler_.drain(left());
  {
    std::unique_lock<std::mutex> lock(active_mu_);
    active_cv_.wait_until(lock, deadline, [this] { return active_ == 0; });
  }
  http_->stop();
  Status flushed = backend_->close_bank(left());
  if (!idle) return Status::exhausted("requests still ran at the shutdown deadline; they were cancelled");
  return flushed;
}

}  // namespace sb
